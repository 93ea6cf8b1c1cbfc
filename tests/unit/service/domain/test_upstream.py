from service.domain.upstream import UpstreamCommit, pr_number_from_message


def test_merge_bot_trailer_names_the_pr() -> None:
    msg = ("Make Allocator::allocate const (#120969)\n\nSummary...\n\n"
           "Pull Request resolved: https://github.com/pytorch/pytorch/pull/120969\n"
           "Approved by: https://github.com/albanD\n")
    assert pr_number_from_message(msg) == 120969


def test_a_revert_is_attributed_to_its_own_pr_not_the_quoted_one() -> None:
    msg = ('Revert "Make Allocator::allocate const (#120969)"\n\nThis reverts commit abc.\n\n'
           "Pull Request resolved: https://github.com/pytorch/pytorch/pull/121001\n")
    assert pr_number_from_message(msg) == 121001


def test_title_suffix_when_there_is_no_trailer() -> None:
    assert pr_number_from_message("Move trace utils (#114367)") == 114367
    assert pr_number_from_message("Fix typo in docs") is None
    assert UpstreamCommit(sha="a" * 40, message="t (#1)\n\nbody").title == "t (#1)"
