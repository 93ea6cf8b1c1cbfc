"""Server-side SVG charts: well-formed, proportional, escaped, accessible."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from service.domain.charts import HEIGHT, Series, bar_chart, line_chart

NS = {"s": "http://www.w3.org/2000/svg"}


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on malformed markup


def test_bar_heights_are_proportional_and_zero_bars_are_omitted() -> None:
    svg = parse(bar_chart(["w1", "w2", "w3"], [Series("opened", [2, 0, 8]),
                                               Series("resolved", [4, 1, 0])],
                          title="Breakages", y_label="n"))
    bars = svg.findall("s:rect[@height]", NS)
    bars = [b for b in bars if b.find("s:title", NS) is not None]
    heights = {b.find("s:title", NS).text: float(b.get("height")) for b in bars}  # type: ignore[union-attr,arg-type]
    assert set(heights) == {"opened, week of w1: 2", "opened, week of w3: 8",
                            "resolved, week of w1: 4", "resolved, week of w2: 1"}
    assert heights["opened, week of w3: 8"] == 4 * heights["opened, week of w1: 2"]
    # The axis top is a whole-number multiple of four: 8 fits exactly.
    ticks = [t.text for t in svg.findall("s:text[@class='chart-tick']", NS)]
    assert ticks[:5] == ["0", "2", "4", "6", "8"]


def test_labels_and_names_are_escaped() -> None:
    evil = "<script>alert(1)</script>"
    svg = line_chart([evil], [Series(evil, [0.5])], title=evil, y_label=evil, y_max=1.0,
                     percent=True)
    assert "<script>" not in svg
    root = parse(svg)
    assert root.find("s:title", NS).text == evil  # type: ignore[union-attr]
    assert root.get("role") == "img"


def test_missing_weeks_break_the_line() -> None:
    svg = parse(line_chart(["a", "b", "c", "d", "e"], [Series("x", [1.0, 0.5, None, 0.2, 0.4])],
                           title="t", y_label="y", y_max=1.0, percent=True))
    lines = svg.findall("s:polyline", NS)
    assert [len(p.get("points", "").split()) for p in lines] == [2, 2]
    # A pass rate of 100% sits on the top gridline, 0% would sit on the bottom one.
    first_y = float(lines[0].get("points", "").split()[0].split(",")[1])
    assert first_y < HEIGHT / 4
    assert "100%" in [t.text for t in svg.findall("s:text", NS)]


def test_series_differ_by_more_than_colour() -> None:
    svg = line_chart(["a", "b"], [Series("one", [0.1, 0.2]), Series("two", [0.3, 0.4])],
                     title="t", y_label="y", y_max=1.0)
    root = parse(svg)
    dashes = {p.get("stroke-dasharray") for p in root.findall("s:polyline", NS)}
    assert len(dashes) == 2


def test_two_charts_have_distinct_ids() -> None:
    a = parse(bar_chart(["w"], [Series("s", [1])], title="First chart", y_label="n"))
    b = parse(bar_chart(["w"], [Series("s", [1])], title="Second chart", y_label="n"))
    assert a.get("aria-labelledby") != b.get("aria-labelledby")


def test_empty_data_still_renders() -> None:
    parse(bar_chart([], [], title="Nothing", y_label="n"))
    parse(line_chart(["w"], [], title="Nothing", y_label="n"))
