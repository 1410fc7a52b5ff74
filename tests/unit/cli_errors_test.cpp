// Bad input through the command line: each case must exit non-zero with a message
// that names what is wrong and where, and never crash.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "partita/npy.h"
#include "ir/tensor.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  bool signaled = false;
  std::string output;  // stdout + stderr
};

// `env` (NAME=VALUE ...) goes before the command.
Result runCli(const std::string& args, const std::string& env = "") {
  const char* cli = std::getenv("PARTITA_CLI");
  std::string bin = cli ? cli : PARTITA_BINARY_DIR "/bin/partita";
  std::string cmd = (env.empty() ? "" : env + " ") + bin + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.signaled = WIFSIGNALED(status);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kModel = PARTITA_SOURCE_DIR "/models/fashion/fashion_cnn.onnx";

class CliErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("partita_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void expectError(const Result& r, const std::vector<std::string>& needles) {
    EXPECT_FALSE(r.signaled) << r.output;
    EXPECT_EQ(r.exit_code, 1) << r.output;
    for (const std::string& s : needles) EXPECT_NE(r.output.find(s), std::string::npos) << "missing '" << s << "' in:\n" << r.output;
  }
  fs::path dir_;
};

TEST_F(CliErrors, GarbageModelFile) {
  std::ofstream(path("garbage.onnx")) << "this is not a protobuf at all \x01\x02\x03";
  expectError(runCli("run " + path("garbage.onnx")), {"garbage.onnx", "not a valid ONNX model"});
}

TEST_F(CliErrors, TruncatedModelFile) {
  std::ifstream in(kModel, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  std::ofstream(path("truncated.onnx"), std::ios::binary).write(bytes.data(), std::streamsize(bytes.size() / 2));
  expectError(runCli("run " + path("truncated.onnx")), {"truncated.onnx", "not a valid ONNX model"});
}

TEST_F(CliErrors, MissingModelFile) {
  expectError(runCli("run " + path("nope.onnx")), {"nope.onnx"});
}

TEST_F(CliErrors, WrongInputShape) {
  partita::writeNpy(path("x.npy"), partita::Tensor(partita::DType::kFloat32, {1, 1, 28, 28}).view());
  expectError(runCli("run " + kModel + " --input input=" + path("x.npy")),
              {"input 'input'", "float32[100,1,28,28]", "float32[1,1,28,28]"});
}

TEST_F(CliErrors, WrongInputDtype) {
  partita::writeNpy(path("x.npy"), partita::Tensor(partita::DType::kFloat64, {100, 1, 28, 28}).view());
  expectError(runCli("run " + kModel + " --input input=" + path("x.npy")), {"input 'input'", "float64"});
}

TEST_F(CliErrors, UnknownInputName) {
  partita::writeNpy(path("x.npy"), partita::Tensor(partita::DType::kFloat32, {100, 1, 28, 28}).view());
  expectError(runCli("run " + kModel + " --input input=" + path("x.npy") + " --input pixels=" + path("x.npy")),
              {"no input named 'pixels'", "inputs: input"});
}

TEST_F(CliErrors, MissingInput) {
  // A two-input model is needed to leave one out; the conformance data has one.
  std::string model = "/usr/share/libonnx-testdata/data/node/test_add/model.onnx";
  ASSERT_TRUE(fs::exists(model));
  partita::writeNpy(path("x.npy"), partita::Tensor(partita::DType::kFloat32, {3, 4, 5}).view());
  expectError(runCli("run " + model + " --input x=" + path("x.npy")), {"missing input 'y'"});
}

TEST_F(CliErrors, CorruptInputFile) {
  std::ofstream(path("bad.npy")) << "\x93NUMPY but then nonsense";
  expectError(runCli("run " + kModel + " --input input=" + path("bad.npy")), {"bad.npy", "not a readable .npy file"});
}

TEST(Cli, HelpListsCommands) {
  Result r = runCli("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("run"), std::string::npos) << r.output;
  Result rr = runCli("run --help");
  EXPECT_EQ(rr.exit_code, 0);
  EXPECT_NE(rr.output.find("--input"), std::string::npos) << rr.output;
}

TEST_F(CliErrors, UnknownThreadWaitPolicy) {
  // docs/threads.md: PARTITA_THREAD_WAIT is adaptive, adaptive-team, spin or block.
  expectError(runCli("run " + kModel + " --input input=" PARTITA_SOURCE_DIR "/models/fashion/test_images.npy --quiet",
                     "PARTITA_THREAD_WAIT=sometimes"),
              {"PARTITA_THREAD_WAIT='sometimes'", "expected adaptive, adaptive-team, spin or block"});
  for (const char* policy : {"adaptive", "adaptive-team", "spin", "block"}) {
    Result r = runCli("run " + kModel + " --input input=" PARTITA_SOURCE_DIR "/models/fashion/test_images.npy --quiet",
                      std::string("PARTITA_THREAD_WAIT=") + policy);
    EXPECT_EQ(r.exit_code, 0) << policy << ": " << r.output;
  }
}

}  // namespace
