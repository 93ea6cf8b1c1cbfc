from service.domain.nodeids import stable_nodeid


def test_a_run_trees_location_is_dropped_from_the_node_id():
    a = ".ootci/cache/sources/flat/nogit-3f2a9c/tests/test_x.py::test_y[float32]"
    b = ".ootci/cache/sources/flat/nogit-77e01b/tests/test_x.py::test_y[float32]"
    git = "/home/ci/.ootci/cache/sources/acme/0123456789abcdef01234567-89abcdef/tests/test_x.py::test_y[float32]"
    assert stable_nodeid(a) == stable_nodeid(b) == stable_nodeid(git) == "tests/test_x.py::test_y[float32]"


def test_node_ids_of_the_backend_itself_are_left_alone():
    for nodeid in ("tests/test_x.py::test_y", "sources/test_x.py::test_y",
                   "tests/sources/a/b/test_x.py::test_y", "<session exit>",
                   "tests/test_x.py::test_path[sources/a/nogit-12/x]"):
        assert stable_nodeid(nodeid) == nodeid
