// The `partita` command line: one file per subcommand, each adding itself to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace partita::cli {

// Each adds a subcommand whose callback does the work and throws partita::Error on
// failure; main() prints "error: <message>" and exits 1.
void addRunCommand(CLI::App& app);          // cmd_run.cpp
void addConformanceCommand(CLI::App& app);  // cmd_conformance.cpp
void addCompileCommand(CLI::App& app);      // cmd_compile.cpp
void addInspectCommand(CLI::App& app);      // cmd_inspect.cpp

}  // namespace partita::cli
