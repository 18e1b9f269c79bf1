// The console printer: a line per trial on the progress stream as the search runs, then the
// table of trials, the answer and the notes for people (print_search).
#include "report/printers.h"
#include "saturate/report/report.h"

namespace saturate {
namespace {

class ConsolePrinter final : public Printer {
 public:
  ConsolePrinter(std::ostream& out, std::ostream* progress) : out_(out), progress_(progress) {}
  void begin(const RunContext& context) override { context_ = context; }
  void trial(const Trial& t) override {
    if (progress_) *progress_ << trial_line(t) << std::endl;
  }
  void result(const SearchReport& r) override {
    print_search(out_, context_, r.result);
    out_ << r.notes << std::flush;
  }
  void end() override { out_.flush(); }

 private:
  std::ostream& out_;
  std::ostream* progress_;
  RunContext context_;
};

}  // namespace

std::unique_ptr<Printer> make_console_printer(std::ostream& out, std::ostream* progress) {
  return std::make_unique<ConsolePrinter>(out, progress);
}

}  // namespace saturate
