// Implements: typed_results.h.
#include "typed_results.h"

#include <pybind11/stl.h>

#include "saturate/report/report.h"
#include "saturate/session/memory_session.h"

namespace py = pybind11;

namespace saturate {

py::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& v : j) out.append(to_python(v));
      return std::move(out);
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [key, v] : j.items()) out[py::str(key)] = to_python(v);
      return std::move(out);
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  throw std::logic_error("a JSON value of a type the printers never write (binary)");
}

void bind_typed_results(py::module_& m) {
  py::class_<Trial>(m, "Trial", "One trial of a search (probe/trial.h).")
      .def_readonly("batch", &Trial::batch)
      .def_property_readonly("status", [](const Trial& t) { return to_string(t.status); })
      .def_readonly("step_time_ms", &Trial::step_time_ms)
      .def_readonly("samples_per_s", &Trial::samples_per_s)
      .def_readonly("peak_allocated_bytes", &Trial::peak_allocated_bytes)
      .def_readonly("peak_reserved_bytes", &Trial::peak_reserved_bytes)
      .def_readonly("steps", &Trial::steps)
      .def_readonly("error", &Trial::error)
      .def("json", [](const Trial& t) { return to_python(trial_json(t)); }, "The trial as the search JSON has it.");
  py::class_<BatchAlternative>(m, "BatchAlternative")
      .def_readonly("name", &BatchAlternative::name)
      .def_readonly("batch", &BatchAlternative::batch)
      .def_readonly("reason", &BatchAlternative::reason);
  py::class_<BatchDecision>(m, "BatchDecision", "The one answer of a search (search/decision.h).")
      .def_readonly("batch", &BatchDecision::batch)
      .def_property_readonly("objective", [](const BatchDecision& d) { return to_string(d.objective); })
      .def_property_readonly("requested", [](const BatchDecision& d) { return to_string(d.requested); })
      .def_readonly("reason", &BatchDecision::reason)
      .def_readonly("fallback", &BatchDecision::fallback)
      .def_readonly("alternatives", &BatchDecision::alternatives);
  py::class_<ObjectiveOutcome>(m, "ObjectiveOutcome", "What an objective chose and why (search/objective.h).")
      .def_property_readonly("objective", [](const ObjectiveOutcome& o) { return to_string(o.objective); })
      .def_property_readonly("requested", [](const ObjectiveOutcome& o) { return to_string(o.requested); })
      .def_readonly("batch", &ObjectiveOutcome::batch)
      .def_readonly("reason", &ObjectiveOutcome::reason)
      .def_readonly("fallback", &ObjectiveOutcome::fallback)
      .def_property_readonly("knee_batch",
                             [](const ObjectiveOutcome& o) { return o.curve ? o.curve->knee_batch : int64_t{0}; })
      .def_property_readonly("noise_scale",
                             [](const ObjectiveOutcome& o) { return o.noise ? o.noise->noise_scale : std::nullopt; })
      .def_property_readonly("lr_gain", [](const ObjectiveOutcome& o) { return o.goodput ? o.goodput->lr_gain : 1.0; })
      .def("json", [](const ObjectiveOutcome& o) { return to_python(to_json(o)); });
  py::class_<SearchResult>(m, "SearchResult", "A search's answer (search/search.h).")
      .def_readonly("max_batch", &SearchResult::max_batch)
      .def_readonly("max_batch_exact", &SearchResult::max_batch_exact)
      .def_readonly("capped", &SearchResult::capped)
      .def_readonly("recommended_batch", &SearchResult::recommended_batch)
      .def_readonly("throughput_batch", &SearchResult::throughput_batch)
      .def_readonly("trials", &SearchResult::trials)
      .def_readonly("trial_steps", &SearchResult::trial_steps)
      .def_readonly("budget_bytes", &SearchResult::budget_bytes)
      .def_readonly("target_bytes", &SearchResult::target_bytes)
      .def_readonly("error", &SearchResult::error)
      .def_readonly("memory_model", &SearchResult::memory_model);
  py::class_<MemoryLaw>(m, "MemoryLaw", "Peak bytes against the batch, least squares over the fitting trials.")
      .def_readonly("fixed_bytes", &MemoryLaw::fixed_bytes)
      .def_readonly("per_sample_bytes", &MemoryLaw::per_sample_bytes)
      .def_readonly("valid", &MemoryLaw::valid);
  py::class_<ComputeSummary>(m, "ComputeSummary", "A search's FLOPs, rate, GEMM peak and MFU (report/report.h).")
      .def_readonly("peak_flops_per_s", &ComputeSummary::peak_flops_per_s)
      .def_readonly("peak_method", &ComputeSummary::peak_method)
      .def_readonly("peak_threads", &ComputeSummary::peak_threads)
      .def_readonly("peak_others_busy_cpus", &ComputeSummary::peak_others_busy_cpus)
      .def_readonly("trials_others_busy_cpus", &ComputeSummary::trials_others_busy_cpus)
      .def_readonly("peak_first_flops_per_s", &ComputeSummary::peak_first_flops_per_s)
      .def_readonly("analytic_flops_per_sample", &ComputeSummary::analytic_flops_per_sample)
      .def_readonly("load_note", &ComputeSummary::load_note)
      .def_readonly("batch", &ComputeSummary::batch)
      .def_readonly("flops_per_sample", &ComputeSummary::flops_per_sample)
      .def_readonly("recompute_flops_per_step", &ComputeSummary::recompute_flops_per_step)
      .def_readonly("achieved_flops_per_s", &ComputeSummary::achieved_flops_per_s)
      .def_readonly("hfu", &ComputeSummary::hfu)
      .def_readonly("mfu", &ComputeSummary::mfu)
      .def_readonly("mfu_note", &ComputeSummary::mfu_note);
  py::class_<RankMax>(m, "RankMax", "One rank's own budget and largest batch (dist/rank_synced.h).")
      .def_readonly("rank", &RankMax::rank)
      .def_readonly("budget_bytes", &RankMax::budget_bytes)
      .def_readonly("max_batch", &RankMax::max_batch)
      .def_readonly("exact", &RankMax::exact);
  py::class_<SearchOutcome>(m, "SearchOutcome", "A search as Python receives it: typed, with its JSON and text.")
      .def_readonly("search", &SearchOutcome::search)
      .def_readonly("compute", &SearchOutcome::compute)
      .def_readonly("ranks", &SearchOutcome::ranks)
      .def_readonly("decision", &SearchOutcome::decision)
      .def_readonly("objective", &SearchOutcome::objective)
      .def_readonly("text", &SearchOutcome::text)
      .def_readonly("memory_growth_warning", &SearchOutcome::memory_growth_warning)
      .def("json", [](const SearchOutcome& o) { return to_python(o.json); }, "What `saturate search --json` writes.");
  py::class_<FastPathTrial>(m, "FastPathTrial", "One switch tried (search/fast_path_choice.h).")
      .def_readonly("name", &FastPathTrial::name)
      .def_readonly("kept", &FastPathTrial::kept)
      .def_readonly("baseline_ms", &FastPathTrial::baseline_ms)
      .def_readonly("with_ms", &FastPathTrial::with_ms)
      .def_readonly("gain", &FastPathTrial::gain)
      .def_readonly("note", &FastPathTrial::note);
  py::class_<FastPathChoice>(m, "FastPathChoice")
      .def_property_readonly("chosen", [](const FastPathChoice& c) { return c.chosen.names(); })
      .def_readonly("tried", &FastPathChoice::tried)
      .def_readonly("baseline_ms", &FastPathChoice::baseline_ms)
      .def_readonly("chosen_ms", &FastPathChoice::chosen_ms);
  py::class_<MemoryBreakdown>(m, "MemoryBreakdown", "Where a step's peak went (probe/findings.h).")
      .def_readonly("parameters_bytes", &MemoryBreakdown::parameters_bytes)
      .def_readonly("gradients_bytes", &MemoryBreakdown::gradients_bytes)
      .def_readonly("optimizer_state_bytes", &MemoryBreakdown::optimizer_state_bytes)
      .def_readonly("inputs_bytes", &MemoryBreakdown::inputs_bytes)
      .def_readonly("activations_bytes", &MemoryBreakdown::activations_bytes)
      .def_readonly("workspace_bytes", &MemoryBreakdown::workspace_bytes)
      .def_readonly("communication_bytes", &MemoryBreakdown::communication_bytes)
      .def_readonly("gathered_parameters_bytes", &MemoryBreakdown::gathered_parameters_bytes)
      .def_readonly("other_bytes", &MemoryBreakdown::other_bytes)
      .def_readonly("peak_allocated_bytes", &MemoryBreakdown::peak_allocated_bytes)
      .def_readonly("peak_reserved_bytes", &MemoryBreakdown::peak_reserved_bytes)
      .def_readonly("saved_for_backward_bytes", &MemoryBreakdown::saved_for_backward_bytes)
      .def_readonly("peak_phase", &MemoryBreakdown::peak_phase);
  py::class_<LeakSite>(m, "LeakSite")
      .def_readonly("site", &LeakSite::site)
      .def_readonly("bytes_per_step", &LeakSite::bytes_per_step)
      .def_readonly("allocations_per_step", &LeakSite::allocations_per_step);
  py::class_<LeakCheckResult>(m, "LeakCheckResult", "A leak check's verdict (memory/leak_check.h).")
      .def_property_readonly("detected", [](const LeakCheckResult& r) { return r.report.detected; })
      .def_property_readonly("bytes_per_step", [](const LeakCheckResult& r) { return r.report.bytes_per_step; })
      .def_property_readonly("first_step", [](const LeakCheckResult& r) { return r.report.first_step; })
      .def_property_readonly("steps", [](const LeakCheckResult& r) { return r.report.steps; })
      .def_readonly("sites", &LeakCheckResult::sites)
      .def_readonly("oom_step", &LeakCheckResult::oom_step)
      .def_readonly("host_growth_bytes", &LeakCheckResult::host_growth_bytes)
      .def_readonly("error", &LeakCheckResult::error);
  py::class_<PlanResult>(m, "PlanResult", "The batch predicted for another device (memory/plan.h).")
      .def_readonly("target", &PlanResult::target)
      .def_readonly("capacity_bytes", &PlanResult::capacity_bytes)
      .def_readonly("max_batch", &PlanResult::max_batch)
      .def_readonly("recommended_batch", &PlanResult::recommended_batch)
      .def_readonly("predicted_peak_bytes", &PlanResult::predicted_peak_bytes)
      .def_readonly("predicted_max_peak_bytes", &PlanResult::predicted_max_peak_bytes);
  py::class_<BottleneckFinding>(m, "BottleneckFinding", "The bottleneck verdict (monitor/bottleneck.h).")
      .def_readonly("verdict", &BottleneckFinding::verdict)
      .def_readonly("reason", &BottleneckFinding::reason)
      .def_readonly("fix", &BottleneckFinding::fix)
      .def_readonly("between", &BottleneckFinding::between)
      .def("evidence", [](const BottleneckFinding& b) { return to_python(b.evidence); }, "Every number looked at.");
  py::class_<TrialFindings>(m, "TrialFindings", "What the observers found in a window of steps (probe/findings.h).")
      .def_readonly("bottleneck", &TrialFindings::bottleneck)
      .def_property_readonly("phases_ms", [](const TrialFindings& f) {
        py::dict out;
        if (f.phases)
          for (const auto& [phase, ms] : f.phases->ms) out[py::str(phase)] = ms;
        return out;
      });
  py::class_<MemorySessionResult>(m, "MemorySessionResult", "`saturate memory`'s result (session/memory_session.h).")
      .def_readonly("trial", &MemorySessionResult::trial)
      .def_readonly("breakdown", &MemorySessionResult::breakdown)
      .def_property_readonly("leak_detected", [](const MemorySessionResult& r) { return r.leak && r.leak->report.detected; });
}

}  // namespace saturate
