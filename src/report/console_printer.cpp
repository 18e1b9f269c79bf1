// The console printer: a line per trial on the progress stream as the search runs, then the
// table of trials, the answer and the notes for people (print_search).
#include <sstream>

#include "report/printers.h"
#include "saturate/report/report.h"

namespace saturate {
namespace {

class ConsolePrinter final : public Printer {
 public:
  ConsolePrinter(std::ostream& out, std::ostream* progress, OptionNamer name_of)
      : out_(out), progress_(progress), name_of_(std::move(name_of)) {}
  void begin(const RunContext& context) override { context_ = context; }
  void trial(const Trial& t) override {
    if (progress_) *progress_ << trial_line(t) << std::endl;
  }
  void result(const SearchReport& r) override {
    std::ostringstream text;
    print_search(text, context_, r.result, &r.decision, &r.whole_run);
    out_ << (name_of_ ? name_options(text.str(), name_of_) : text.str()) << r.notes << std::flush;
  }
  void end() override { out_.flush(); }

 private:
  std::ostream& out_;
  std::ostream* progress_;
  OptionNamer name_of_;
  RunContext context_;
};

}  // namespace

SearchEffort effort_of(const std::vector<const SearchResult*>& curves) {
  SearchEffort e;
  for (const SearchResult* r : curves) {
    e.trials += r->trials.size();
    e.training_steps += r->trial_steps;
    e.seconds += r->search_seconds;
    ++e.curves;
  }
  return e;
}

std::unique_ptr<Printer> make_console_printer(std::ostream& out, std::ostream* progress, OptionNamer name_of) {
  return std::make_unique<ConsolePrinter>(out, progress, std::move(name_of));
}

}  // namespace saturate
