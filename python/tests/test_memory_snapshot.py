"""`saturate memory --timeline FILE.pickle` (issue 29): PyTorch's memory snapshot format, read
by PyTorch's own memory-viz helpers, with the timeline's peak."""
import json
import os
import pickle
import subprocess

import pytest
from torch.cuda import _memory_viz

SATURATE = os.path.join(os.environ["SATURATE_BUILD_DIR"], "saturate")


def replayed_peak(snapshot):
    """What memory_viz's timeline shows at its highest: the blocks live at the start, then each
    allocation added and each completed free taken away."""
    live = sum(b["size"] for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    peak = live
    for e in snapshot["device_traces"][0]:
        if e["action"] == "alloc":
            live += e["size"]
        elif e["action"] == "free_completed":
            live -= e["size"]
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("model", ["mlp", "convnet"])
def test_a_timeline_written_as_a_pickle_is_a_memory_snapshot_with_the_timelines_peak(tmp_path, model):
    path, js = tmp_path / "step.pickle", tmp_path / "run.json"
    out = subprocess.run([SATURATE, "memory", "--model", model, "--batch", "32", "--device", "cpu",
                          "--memory-budget", "256MiB", "--threads", "1", "--timeline", str(path), "--json", str(js)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    with open(path, "rb") as f:
        snapshot = pickle.load(f)  # plain Python objects: no torch needed to read it
    timeline = json.loads(js.read_text())["timeline"]
    trace = snapshot["device_traces"][0]
    assert {e["action"] for e in trace} >= {"alloc", "free_requested", "free_completed"}
    assert all(e["time_us"] >= 0 for e in trace)
    assert replayed_peak(snapshot) == timeline["peak_allocated_bytes"]
    # PyTorch's own helpers read it
    text = _memory_viz.trace(snapshot)
    assert f"{len(trace)} entries" in text
    assert "Summary of segments" in _memory_viz.segsum(snapshot)
    assert "snapshot.pickle" in _memory_viz.trace_plot(snapshot)
