// The machine-readable printers: one JSON document at the end, or JSON Lines as the run goes
// (a context line, a line per trial flushed as it finishes, a result line).
#include "report/printers.h"
#include "saturate/report/report.h"

namespace saturate {
namespace {

class JsonPrinter final : public Printer {
 public:
  explicit JsonPrinter(std::ostream& out) : out_(out) {}
  void begin(const RunContext&) override {}
  void trial(const Trial&) override {}  // a JSON document is whole only at the end
  void result(const SearchReport& r) override { out_ << r.json.dump(2) << "\n" << std::flush; }
  void end() override { out_.flush(); }

 private:
  std::ostream& out_;
};

class JsonLinesPrinter final : public Printer {
 public:
  explicit JsonLinesPrinter(std::ostream& out) : out_(out) {}
  void begin(const RunContext& context) override {
    nlohmann::json j = {{"type", "context"}};
    j.update(context_json(context));
    context_keys_ = context_json(context);
    line(j);
  }
  void trial(const Trial& t) override {
    nlohmann::json j = {{"type", "trial"}};
    j.update(trial_json(t));
    line(j);
  }
  void result(const SearchReport& r) override {
    nlohmann::json j = {{"type", "result"}};
    for (const auto& [key, value] : r.json.items())
      if (key != "trials" && !(context_keys_.contains(key) && context_keys_[key] == value)) j[key] = value;
    line(j);
  }
  void end() override { out_.flush(); }

 private:
  void line(const nlohmann::json& j) { out_ << j.dump() << "\n" << std::flush; }
  std::ostream& out_;
  nlohmann::json context_keys_ = nlohmann::json::object();
};

}  // namespace

std::unique_ptr<Printer> make_json_printer(std::ostream& out) { return std::make_unique<JsonPrinter>(out); }
std::unique_ptr<Printer> make_json_lines_printer(std::ostream& out) { return std::make_unique<JsonLinesPrinter>(out); }

}  // namespace saturate
