// --html FILE on search, memory and train: the run's JSON drawn as the self-contained HTML report
// (report/html_report.h), written where the user asked (core/output_file.h), checked before the work.
#pragma once
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace saturate::cli {

void add_html_flag(CLI::App& app, std::string& path);
/// Before the work: a path that cannot be written is a usage error now, not after the run.
void check_html_path(const std::string& path);
/// Renders `run` and writes it to `path` (nothing when `path` is empty).
void write_html_report(const nlohmann::json& run, const std::string& path);

}  // namespace saturate::cli
