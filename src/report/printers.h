// Private: the printers behind make_printer (printer.h).
#pragma once
#include <memory>
#include <ostream>

#include "saturate/report/printer.h"

namespace saturate {
std::unique_ptr<Printer> make_console_printer(std::ostream& out, std::ostream* progress, OptionNamer name_of);
std::unique_ptr<Printer> make_json_printer(std::ostream& out);
std::unique_ptr<Printer> make_json_lines_printer(std::ostream& out);
std::unique_ptr<Printer> make_csv_printer(std::ostream& out);
std::unique_ptr<Printer> make_markdown_printer(std::ostream& out);
}  // namespace saturate
