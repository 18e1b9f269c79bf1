#!/usr/bin/env python3
"""End to end: real runs' HTML reports, rendered in Debian's headless Chromium.

Runs the real `saturate` binary for search, memory and train on small CPU workloads, writes each
run's JSON, turns it into HTML with `saturate report`, has headless Chromium load the page and
dump the DOM it built, and checks that DOM against the JSON: each chart the JSON has data for is
there (else a sentence, class "missing", says what would add it), and each point, line, bar and
segment, turned back from pixels into values through the axis mapping its <svg> carries
(data-x-scale, data-x-min/max, data-y-min/max, data-plot-*), equals the JSON's value within a
pixel; the counts match the trials (train: the monitor windows, each window's utilization
mean at its middle). Also: a JSON that is not a run is refused with exit 2.

usage: check_html_report.py SATURATE_BINARY [WORK_DIR]
"""
import html.parser
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

FAILURES = []
CHECKS = [0]


def check(cond, what):
    CHECKS[0] += 1
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what, file=sys.stderr)
    return cond


def run(cmd, timeout=300):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p, time.monotonic() - t0


def find_chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Dom(html.parser.HTMLParser):
    """The elements of the page as (tag, attrs, the id of the <svg> they are in, text)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self.svgs = {}
        self.stack = []  # open svg ids
        self.missing = {}
        self.sections = set()
        self.text_parts = []
        self._in_missing = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svgs[a.get("id", "")] = a
            self.stack.append(a.get("id", ""))
            return
        if tag == "section" and "id" in a:
            self.sections.add(a["id"])
        if tag == "p" and "missing" in a.get("class", "").split():
            self._in_missing = a.get("data-chart", "")
            self.missing[self._in_missing] = ""
        self.elements.append((tag, a, self.stack[-1] if self.stack else None))

    def handle_endtag(self, tag):
        if tag == "svg" and self.stack:
            self.stack.pop()
        if tag == "p":
            self._in_missing = None

    def handle_data(self, data):
        self.text_parts.append(data)
        if self._in_missing is not None:
            self.missing[self._in_missing] += data

    def marks(self, svg_id, tag, cls):
        """The marks of a chart with class `cls` (not the legend's swatches)."""
        return [a for (t, a, s) in self.elements if s == svg_id and t == tag and cls in a.get("class", "").split()
                and "swatch" not in a.get("class", "").split()]


class Mapping:
    def __init__(self, a):
        self.x_scale = a["data-x-scale"]
        self.x_min, self.x_max = float(a["data-x-min"]), float(a["data-x-max"])
        self.y_min, self.y_max = float(a["data-y-min"]), float(a["data-y-max"])
        self.left, self.top = float(a["data-plot-left"]), float(a["data-plot-top"])
        self.width, self.height = float(a["data-plot-width"]), float(a["data-plot-height"])

    def x(self, px):
        f = (float(px) - self.left) / self.width
        if self.x_scale == "log2":
            return 2 ** (math.log2(self.x_min) + f * (math.log2(self.x_max) - math.log2(self.x_min)))
        return self.x_min + f * (self.x_max - self.x_min)

    def y(self, px):
        return self.y_min + (self.top + self.height - float(px)) / self.height * (self.y_max - self.y_min)

    def y_tol(self):  # one pixel's worth of value
        return (self.y_max - self.y_min) / self.height

    def x_tol(self, v):
        if self.x_scale == "log2":
            return v * (2 ** ((math.log2(self.x_max) - math.log2(self.x_min)) / self.width) - 1)
        return (self.x_max - self.x_min) / self.width


def near(a, b, tol):
    return abs(a - b) <= tol + 1e-9 * max(abs(a), abs(b))


def polyline(a):
    return [tuple(float(v) for v in p.split(",")) for p in a["points"].split()]


def expect_chart(dom, name, chart, drawn):
    """A chart with data is an <svg class=chart>; one without is a sentence saying what adds it."""
    if drawn:
        ok = check(chart in dom.svgs, f"{name}: {chart} is drawn (the JSON has its data)")
        check(chart not in dom.missing, f"{name}: {chart} has no 'missing' sentence")
        return ok and "chart" in dom.svgs[chart].get("class", "").split()
    check(chart not in dom.svgs, f"{name}: {chart} is not drawn (no data in the JSON)")
    check(len(dom.missing.get(chart, "").strip()) > 20, f"{name}: a sentence says why {chart} is absent")
    return False


def check_points_against_trials(dom, name, chart, trials, value_key, pick):
    svg = dom.svgs[chart]
    m = Mapping(svg)
    points = dom.marks(chart, "circle", "point")
    want = [i for i, t in enumerate(trials) if pick(t)]
    check(sorted(int(p["data-trial"]) for p in points) == want,
          f"{name}: {chart} has one point per trial {want}, got {[p.get('data-trial') for p in points]}")
    for p in points:
        t = trials[int(p["data-trial"])]
        b, v = float(t["batch"]), float(t[value_key])
        check(float(p["data-x"]) == b and float(p["data-y"]) == v, f"{name}: {chart} point data = JSON {b}, {v}")
        check(near(m.x(p["cx"]), b, m.x_tol(b)), f"{name}: {chart} cx {p['cx']} -> batch {m.x(p['cx'])} vs {b}")
        check(near(m.y(p["cy"]), v, m.y_tol()), f"{name}: {chart} cy {p['cy']} -> {m.y(p['cy'])} vs {value_key} {v}")
    return points


def check_hline(dom, name, chart, cls, value):
    m = Mapping(dom.svgs[chart])
    lines = dom.marks(chart, "line", cls)
    if check(len(lines) == 1, f"{name}: {chart} has its {cls} line"):
        check(near(m.y(lines[0]["y1"]), value, m.y_tol()) and lines[0]["y1"] == lines[0]["y2"],
              f"{name}: {chart} {cls} line at {m.y(lines[0]['y1'])}, JSON {value}")


def check_breakdown(dom, name, breakdown):
    chart = "chart-memory-breakdown"
    m = Mapping(dom.svgs[chart])
    parts = [k for k in ("parameters_bytes", "gradients_bytes", "optimizer_state_bytes", "inputs_bytes",
                         "activations_bytes", "workspace_bytes", "other_bytes", "allocator_overhead_bytes")
             if k in breakdown]
    bars = dom.marks(chart, "rect", "bar")
    check([b["data-x"] for b in bars] == parts, f"{name}: breakdown bars {[b['data-x'] for b in bars]} = parts {parts}")
    for b in bars:
        v = float(breakdown[b["data-x"]])
        top, bottom = m.y(b["y"]), m.y(float(b["y"]) + float(b["height"]))
        check(near(top, v, m.y_tol()) and near(bottom, 0, m.y_tol()),
              f"{name}: bar {b['data-x']} spans {bottom}..{top}, JSON {v}")
    if "peak_allocated_bytes" in breakdown:
        check_hline(dom, name, chart, "peak", float(breakdown["peak_allocated_bytes"]))


def check_phases(dom, name, bars):
    """bars: [(data-x, {phase: ms})] in drawing order."""
    chart = "chart-phases"
    m = Mapping(dom.svgs[chart])
    segs = dom.marks(chart, "rect", "segment")
    seen = {}
    for s in segs:
        top, bottom = m.y(s["y"]), m.y(float(s["y"]) + float(s["height"]))
        check(near(top - bottom, float(s["data-y"]), m.y_tol()) and near(bottom, float(s["data-y0"]), m.y_tol()),
              f"{name}: segment {s['data-x']}/{s['data-phase']} spans {bottom}..{top}, data {s['data-y0']}+{s['data-y']}")
        if s["data-phase"] != "unattributed":
            seen[(s["data-x"], s["data-phase"])] = float(s["data-y"])
    want = {(x, k): float(v) for x, phases in bars for k, v in phases.items()}
    check(seen == want, f"{name}: phase segments {sorted(seen.items())} = JSON {sorted(want.items())}")
    for x, phases in bars:  # stacked in order, from 0
        base = 0.0
        for s in [s for s in segs if s["data-x"] == x]:
            check(near(float(s["data-y0"]), base, 1e-6), f"{name}: segment {x}/{s['data-phase']} stacks on {base}")
            base += float(s["data-y"])


def check_page(dom, name, page):
    check("decision" in dom.sections and "context" in dom.sections, f"{name}: context and decision sections")
    for bad in ("<script", "<link", "<img", "src=\"http", "href=\"http", "url(", "@import"):
        check(bad not in page, f"{name}: the page has no {bad!r} (self-contained)")


def check_search(dom, name, j):
    trials = j["trials"]
    # which charts are drawn is fixed by the run (a monitored fit search with the memory observer):
    # every one, whatever the JSON under test holds; a section missing from it fails below
    for key in ("memory_breakdown", "budget_bytes", "target_bytes"):
        check(key in j, f"{name}: the search's JSON has {key}")
    if expect_chart(dom, name, "chart-peak-memory", True):
        chart = "chart-peak-memory"
        points = check_points_against_trials(dom, name, chart, trials, "peak_reserved_bytes",
                                             lambda t: "peak_reserved_bytes" in t)
        for p in points:
            status = trials[int(p["data-trial"])]["status"]
            want = status if status in ("ok", "oom", "over-target") else "error"
            check(want in p["class"].split(), f"{name}: trial {p['data-trial']} ({status}) marked {p['class']}")
        check(any(t["status"] == "oom" for t in trials), f"{name}: the search ran into an OOM (a mark to check)")
        check_hline(dom, name, chart, "budget", float(j["budget_bytes"]))
        check_hline(dom, name, chart, "target", float(j["target_bytes"]))
        law = j.get("memory_model", {})
        if law.get("valid"):
            lines = dom.marks(chart, "polyline", "law")
            if check(len(lines) == 1, f"{name}: the fitted law is drawn"):
                m = Mapping(dom.svgs[chart])
                for x, y in polyline(lines[0]):
                    b = m.x(x)
                    want = law["fixed_bytes"] + law["per_sample_bytes"] * b
                    check(near(m.y(y), want, m.y_tol() + law["per_sample_bytes"] * m.x_tol(b)),
                          f"{name}: law vertex at batch {b}: {m.y(y)} vs {want}")
    ok_sps = [t for t in trials if t["status"] == "ok" and t.get("samples_per_s", 0) > 0]
    check(len(ok_sps) >= 2, f"{name}: at least two trials ran ({len(ok_sps)}): a curve to draw")
    if expect_chart(dom, name, "chart-throughput", True):
        check_points_against_trials(dom, name, "chart-throughput", trials, "samples_per_s",
                                    lambda t: t["status"] == "ok" and t.get("samples_per_s", 0) > 0)
    if expect_chart(dom, name, "chart-memory-breakdown", True) and "memory_breakdown" in j:
        check_breakdown(dom, name, j["memory_breakdown"])
    with_phases = sorted([t for t in trials if t["status"] == "ok" and "phases_ms" in t], key=lambda t: t["batch"])
    check(bool(with_phases), f"{name}: the monitor timed the phases of the trials that ran")
    if expect_chart(dom, name, "chart-phases", True):
        check_phases(dom, name, [(str(t["batch"]), t["phases_ms"]) for t in with_phases])
    with_util = [i for i, t in enumerate(trials) if "cpu_percent" in t.get("utilization", {})]
    check(bool(with_util), f"{name}: the monitor sampled utilization during the trials")
    if expect_chart(dom, name, "chart-utilization", True):
        chart = "chart-utilization"
        m = Mapping(dom.svgs[chart])
        points = [p for p in dom.marks(chart, "circle", "point") if p["data-series"] == "cpu_percent"]
        check(sorted(int(p["data-trial"]) for p in points) == with_util, f"{name}: one utilization point per trial")
        for p in points:
            i = int(p["data-trial"])
            mean = trials[i]["utilization"]["cpu_percent"]["mean"]
            check(near(m.x(p["cx"]), i, 0.01), f"{name}: utilization point {i} sits in slot {m.x(p['cx'])}")
            check(near(m.y(p["cy"]), mean, m.y_tol()), f"{name}: utilization {m.y(p['cy'])} vs JSON mean {mean}")


def check_memory(dom, name, j):
    if expect_chart(dom, name, "chart-peak-memory", True):
        points = dom.marks("chart-peak-memory", "circle", "point")
        m = Mapping(dom.svgs["chart-peak-memory"])
        if check(len(points) == 1, f"{name}: one point for the one batch"):
            check(near(m.y(points[0]["cy"]), j["peak_reserved_bytes"], m.y_tol()), f"{name}: the peak's point")
            check(near(m.x(points[0]["cx"]), j["batch"], m.x_tol(j["batch"])), f"{name}: the batch's point")
        check_hline(dom, name, "chart-peak-memory", "budget", float(j["budget_bytes"]))
    expect_chart(dom, name, "chart-throughput", False)  # one batch: no curve
    # fixed by the run (one batch with the breakdown and a leak check's timeline), not by the JSON
    check("memory_breakdown" in j, f"{name}: the memory run's JSON has memory_breakdown")
    if expect_chart(dom, name, "chart-memory-breakdown", True) and "memory_breakdown" in j:
        check_breakdown(dom, name, j["memory_breakdown"])
    phases = j.get("timeline", {}).get("phases", [])
    check(bool(phases), f"{name}: the memory run's timeline has phases")
    if expect_chart(dom, name, "chart-phases", True):
        m = Mapping(dom.svgs["chart-phases"])
        segs = [s for s in dom.marks("chart-phases", "rect", "segment") if s["data-phase"] != "unattributed"]
        check(len(segs) == len(phases), f"{name}: one segment per timeline phase")
        for s, p in zip(segs, phases):
            want = p["end_ms"] - p["begin_ms"]
            check(s["data-phase"] == p["phase"], f"{name}: segment {s['data-phase']} = {p['phase']}")
            check(near(m.y(s["y"]) - m.y(float(s["y"]) + float(s["height"])), want, m.y_tol()),
                  f"{name}: {p['phase']} drawn {s['data-y']} ms, timeline {want}")
    expect_chart(dom, name, "chart-utilization", False)


def check_train_utilization(dom, name, j):
    """chart-utilization over time: per percentage field, one point per monitor window at its middle and mean,
    and a line level across each window."""
    windows = [(i, w) for i, w in enumerate(j.get("monitor_windows", [])) if "utilization" in w]
    check(len(windows) >= 2, f"{name}: the run has >= 2 monitor windows with utilization (got {len(windows)})")
    if not expect_chart(dom, name, "chart-utilization", True):  # 30 steps logged every 10: >= 2 windows
        return
    chart = "chart-utilization"
    m = Mapping(dom.svgs[chart])
    series = sorted({k for _, w in windows for k, v in w["utilization"].items()
                     if k.endswith("_percent") and isinstance(v, dict) and "mean" in v})
    check("cpu_percent" in series, f"{name}: the windows have cpu_percent ({series})")
    points = dom.marks(chart, "circle", "point")
    check(sorted({p["data-series"] for p in points}) == series,
          f"{name}: one utilization series per percentage {series}, got {sorted({p['data-series'] for p in points})}")
    for key in series:
        want = [(i, w) for i, w in windows if key in w["utilization"]]
        mine = [p for p in points if p["data-series"] == key]
        check([int(p["data-window"]) for p in mine] == [i for i, _ in want],
              f"{name}: {key}: one point per window {[i for i, _ in want]}, got {[p['data-window'] for p in mine]}")
        for p, (i, w) in zip(mine, want):
            mid, mean = w["start_s"] + w["seconds"] / 2, w["utilization"][key]["mean"]
            check(float(p["data-start-s"]) == w["start_s"] and float(p["data-seconds"]) == w["seconds"]
                  and int(p["data-first-step"]) == w["first_step"] and int(p["data-last-step"]) == w["last_step"],
                  f"{name}: {key} window {i}: the point's data = the window's start, length and steps")
            check(float(p["data-y"]) == mean, f"{name}: {key} window {i}: data-y {p['data-y']} = JSON mean {mean}")
            check(near(m.x(p["cx"]), mid, m.x_tol(mid)), f"{name}: {key} window {i} at {m.x(p['cx'])} s, middle {mid}")
            check(near(m.y(p["cy"]), mean, m.y_tol()), f"{name}: {key} window {i}: {m.y(p['cy'])} vs JSON mean {mean}")
        lines = [l for l in dom.marks(chart, "polyline", "series") if l.get("data-series") == key]
        if check(len(lines) == 1, f"{name}: {key} has one line"):
            vertices = polyline(lines[0])
            edges = [(x, w["utilization"][key]["mean"]) for _, w in want
                     for x in (w["start_s"], w["start_s"] + w["seconds"])]
            check(len(vertices) == len(edges), f"{name}: {key} line: two vertices per window")
            for (x, y), (ex, ey) in zip(vertices, edges):
                check(near(m.x(x), ex, m.x_tol(ex)) and near(m.y(y), ey, m.y_tol()),
                      f"{name}: {key} line vertex ({m.x(x)}, {m.y(y)}) vs window edge ({ex}, {ey})")


def check_train(dom, name, j):
    for chart in ("chart-peak-memory", "chart-throughput", "chart-memory-breakdown"):
        expect_chart(dom, name, chart, False)
    check_train_utilization(dom, name, j)
    # fixed by the run (30 monitored steps): phases and a loss curve, whatever the JSON holds
    check("phases_ms" in j and len(j.get("losses", [])) == 30, f"{name}: the train JSON has phases and 30 losses")
    if expect_chart(dom, name, "chart-phases", True) and "phases_ms" in j:
        check_phases(dom, name, [("run", j["phases_ms"])])
    if expect_chart(dom, name, "chart-loss", True):
        m = Mapping(dom.svgs["chart-loss"])
        lines = dom.marks("chart-loss", "polyline", "loss")
        if check(len(lines) == 1, f"{name}: one loss line"):
            vertices = polyline(lines[0])
            check(len(vertices) == len(j["losses"]), f"{name}: one vertex per step ({len(j['losses'])})")
            for k, ((x, y), loss) in enumerate(zip(vertices, j["losses"])):
                check(near(m.x(x), k + 1, (m.x_max - m.x_min) / m.width), f"{name}: loss vertex {k} at step {m.x(x)}")
                check(near(m.y(y), loss, m.y_tol()), f"{name}: loss at step {k + 1}: {m.y(y)} vs {loss}")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    chromium = find_chromium()
    if not chromium:
        print("check_html_report: error: Chromium is not installed (no 'chromium' on PATH); the reports are "
              "checked in a real browser: run scripts/setup.sh, which installs Debian's chromium", file=sys.stderr)
        return 1
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="saturate-report-")
    os.makedirs(work, exist_ok=True)
    cpu = ["--device", "cpu", "--threads", "1", "-q"]
    runs = {
        # a fit search to an out-of-memory boundary under a small budget; the monitor (default) adds phases and
        # utilization, the memory observer the breakdown
        "search": [binary, "search", "--model", "convnet", "--memory-budget", "256MiB"] + cpu,
        "memory": [binary, "memory", "--model", "convnet", "--memory-budget", "256MiB", "--batch", "64",
                   "--leak-check-steps", "3", "--device", "cpu", "--threads", "1"],
        # not quiet: a monitor window closes at a progress line (the first at the first line, later ones after
        # >= 1 s) and at the end, so 30 steps logged every 10 make >= 2 windows for chart-utilization
        "train": [binary, "train", "--model", "mlp", "--data", "synthetic", "--steps", "30", "--log-every", "10",
                  "--device", "cpu", "--threads", "1"],
    }
    checkers = {"search": check_search, "memory": check_memory, "train": check_train}
    for name, cmd in runs.items():
        path = os.path.join(work, name + ".json")
        page = os.path.join(work, name + ".html")
        p, secs = run(cmd + ["--json", path])
        if not check(p.returncode == 0, f"{name}: `{' '.join(cmd)}` exits 0 (got {p.returncode}): {p.stderr[-2000:]}"):
            continue
        print(f"{name}: run {secs:.1f} s", file=sys.stderr)
        with open(path) as f:
            j = json.load(f)
        p, secs = run([binary, "report", path, "-o", page])
        if not check(p.returncode == 0 and os.path.getsize(page) > 0, f"{name}: saturate report exits 0: {p.stderr}"):
            continue
        check(f"{name} report of" in p.stderr, f"{name}: saturate report says what it wrote: {p.stderr!r}")
        print(f"{name}: saturate report {secs * 1000:.0f} ms (process included), {os.path.getsize(page)} bytes",
              file=sys.stderr)
        p, secs = run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                       f"--user-data-dir={os.path.join(work, 'chromium-profile')}", "--dump-dom",
                       "file://" + os.path.abspath(page)], timeout=120)
        if not check(p.returncode == 0 and "<svg" in p.stdout,
                     f"{name}: chromium --dump-dom renders the page (exit {p.returncode}): {p.stderr[-1500:]}"):
            continue
        print(f"{name}: chromium {secs:.1f} s", file=sys.stderr)
        dom = Dom()
        dom.feed(p.stdout)
        check_page(dom, name, p.stdout)
        checkers[name](dom, name, j)

    # not a run: refused with exit 2, naming the file and what is missing
    bad = os.path.join(work, "not_a_run.json")
    with open(bad, "w") as f:
        json.dump({"hello": 1}, f)
    p, _ = run([binary, "report", bad, "-o", os.path.join(work, "bad.html")])
    check(p.returncode == 2 and bad in p.stderr and "not a saturate run: no 'trials'" in p.stderr,
          f"a JSON that is not a run: exit 2 naming the file and the keys (got {p.returncode}: {p.stderr!r})")
    check(not os.path.exists(os.path.join(work, "bad.html")), "a refused report writes no file")

    if FAILURES:
        print(f"check_html_report: {len(FAILURES)} check(s) failed", file=sys.stderr)
        return 1
    print(f"check_html_report: all {CHECKS[0]} checks passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
