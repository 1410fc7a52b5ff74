#include <cstdio>
#include <exception>

#include "partita/error.h"
#include "tools/cli.h"
#include "tools/run_common.h"

int main(int argc, char** argv) {
  CLI::App app{"partita: compile ONNX models into one artifact and run them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "partita 0.1.0");
  partita::cli::addRunCommand(app);
  partita::cli::addConformanceCommand(app);
  partita::cli::addCompileCommand(app);
  partita::cli::addInspectCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (...) {
    std::fprintf(stderr, "error: %s\n", partita::cli::describeCurrentException().c_str());
    return 1;
  }
  return 0;
}
