// Writes the seed corpus of execute_request_fuzzer: one serialised ExecuteRequest per file,
// valid requests of every operation and the attack cases privhelper must refuse. Run
//   bazel run //tests/fuzz:make_execute_seeds -- "$PWD/tests/fuzz/execute_corpus"
// (files are named seed_*; the fuzz campaign adds libFuzzer-named files beside them).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "common/wire/limits.h"
#include "google/protobuf/unknown_field_set.h"
#include "proto/privhelper.pb.h"
#include "tests/fuzz/execute_fixture.h"

namespace {

namespace pb = ::sn::privhelper::v1;
namespace w = ::sn::wire;

constexpr char kRequestId[] = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
constexpr char kSandbox[] = "11111111-2222-4333-8444-555555555555";

pb::ExecuteRequest Base() {
  pb::ExecuteRequest r;
  r.set_request_id(kRequestId);
  r.set_generation(sn::fuzz::kHeldGeneration);
  r.set_budget_ms(30000);
  r.set_installation_id(std::string(sn::fuzz::kInstallationId));
  return r;
}

pb::ExecuteRequest Create(const std::string& image = "busybox") {
  pb::ExecuteRequest r = Base();
  pb::CreateArgs* c = r.mutable_create();
  c->set_sandbox_id(kSandbox);
  c->set_image(image);
  c->add_command("/bin/sh");
  c->add_command("-c");
  c->add_command("sleep 3600");
  (*c->mutable_env())["PATH"] = "/usr/bin:/bin";
  (*c->mutable_env())["_LANG"] = "C.UTF-8 \xc3\xa9";
  c->set_cpu_millis(500);
  c->set_memory_bytes(int64_t{256} << 20);
  return r;
}

pb::ExecuteRequest Exec(int64_t payload_bytes) {
  pb::ExecuteRequest r = Base();
  pb::ExecArgs* e = r.mutable_exec();
  e->set_sandbox_id(kSandbox);
  e->add_argv("cat");
  e->add_argv("-");
  e->set_output_limit_bytes(1 << 20);
  r.set_payload_bytes(payload_bytes);
  return r;
}

pb::ExecuteRequest WriteFile(const std::string& path, int64_t payload_bytes) {
  pb::ExecuteRequest r = Base();
  pb::WriteFileArgs* a = r.mutable_write_file();
  a->set_sandbox_id(kSandbox);
  a->set_path(path);
  a->set_mode(0644);
  r.set_payload_bytes(payload_bytes);
  return r;
}

pb::ExecuteRequest ReadFile(const std::string& path, int64_t max_bytes) {
  pb::ExecuteRequest r = Base();
  pb::ReadFileArgs* a = r.mutable_read_file();
  a->set_sandbox_id(kSandbox);
  a->set_path(path);
  a->set_max_bytes(max_bytes);
  return r;
}

pb::ExecuteRequest Sandbox(pb::SandboxArgs* (pb::ExecuteRequest::*field)(),
                           const std::string& id = kSandbox) {
  pb::ExecuteRequest r = Base();
  ((&r)->*field)()->set_sandbox_id(id);
  return r;
}

google::protobuf::UnknownFieldSet* Unknown(google::protobuf::Message* m) {
  return m->GetReflection()->MutableUnknownFields(m);
}

pb::ExecuteRequest With(pb::ExecuteRequest r, const std::function<void(pb::ExecuteRequest&)>& f) {
  f(r);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output directory>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int written = 0;
  auto put = [&](const std::string& name, const pb::ExecuteRequest& r) {
    std::ofstream out(dir + "/seed_" + name + ".pb", std::ios::binary | std::ios::trunc);
    out << r.SerializeAsString();
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", name.c_str());
      std::exit(1);
    }
    ++written;
  };
  const std::string big_arg(w::kMaxArgBytes, 'x');

  // ---- valid requests of every operation ----
  put("valid_create", Create());
  put("valid_create_python_no_command_no_env", With(Create("python:3.12"), [](auto& r) {
        r.mutable_create()->clear_command();
        r.mutable_create()->clear_env();
      }));
  put("valid_create_at_limits", With(Create("registry.example/app@v1"), [&](auto& r) {
        pb::CreateArgs* c = r.mutable_create();
        c->clear_command();
        for (size_t i = 0; i < w::kMaxCommandArgs; ++i) c->add_command(i == 0 ? big_arg : "a");
        c->clear_env();
        for (size_t i = 0; i < w::kMaxEnvEntries; ++i) {
          (*c->mutable_env())["K" + std::to_string(i)] = "v";
        }
        (*c->mutable_env())["K0"] = std::string(w::kMaxEnvValueBytes, 'v');
        (*c->mutable_env())["K1"] = "x";
        c->set_cpu_millis(w::kMaxCpuMillis);
        c->set_memory_bytes(w::kMaxMemoryBytes);
        r.set_budget_ms(w::kMaxTimeoutMs);
      }));
  put("valid_create_at_minimums", With(Create(), [](auto& r) {
        r.mutable_create()->set_cpu_millis(w::kMinCpuMillis);
        r.mutable_create()->set_memory_bytes(w::kMinMemoryBytes);
        r.set_budget_ms(w::kMinTimeoutMs);
      }));
  put("valid_resume", With(Base(), [](auto& r) { r.mutable_resume()->set_sandbox_id(kSandbox); }));
  put("valid_resume_reconciliation_only", With(Base(), [](auto& r) {
        r.mutable_resume()->set_sandbox_id(kSandbox);
        r.mutable_resume()->set_reconciliation_only(true);
      }));
  put("valid_kill", Sandbox(&pb::ExecuteRequest::mutable_kill));
  put("valid_kill_compute", Sandbox(&pb::ExecuteRequest::mutable_kill_compute));
  put("valid_delete_retained", Sandbox(&pb::ExecuteRequest::mutable_delete_retained));
  put("valid_inspect", Sandbox(&pb::ExecuteRequest::mutable_inspect));
  put("valid_exec_no_stdin", Exec(0));
  put("valid_exec_stdin_declared", Exec(5));
  put("valid_exec_stdin_at_limit", Exec(static_cast<int64_t>(w::kMaxStdinBytes)));
  put("valid_write_file", WriteFile("/etc/app/config.json", 1024));
  put("valid_write_file_at_limit", With(WriteFile("/" + std::string(w::kMaxPathBytes - 1, 'p'),
                                                  static_cast<int64_t>(w::kMaxFileContentBytes)),
                                        [](auto& r) { r.mutable_write_file()->set_mode(0777); }));
  put("valid_read_file", ReadFile("/var/log/app.log", 4096));
  put("valid_read_file_at_limit", ReadFile("/a", w::kMaxReadFileBytes));

  // ---- state privhelper owns ----
  put("resolve_unknown_image", Create("alpine"));
  put("resolve_image_as_tag", Create("busybox:latest"));
  put("resolve_image_as_native_identity", Create("sha256:" + std::string(64, 'a')));
  put("resolve_other_installation", With(Create(), [](auto& r) {
        r.set_installation_id("5d3c2b1a-0f9e-4d8c-b7a6-958473625141");
      }));
  put("resolve_no_installation", With(Create(), [](auto& r) { r.clear_installation_id(); }));
  put("resolve_unheld_generation", With(Create(), [](auto& r) { r.set_generation(8); }));

  // ---- §4 request members ----
  put("bad_request_id_uppercase", With(Create(), [](auto& r) {
        r.set_request_id("0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D");
      }));
  put("bad_request_id_empty", With(Create(), [](auto& r) { r.clear_request_id(); }));
  put("bad_generation_zero", With(Create(), [](auto& r) { r.set_generation(0); }));
  put("bad_generation_negative", With(Create(), [](auto& r) { r.set_generation(-7); }));
  put("bad_budget_zero", With(Create(), [](auto& r) { r.set_budget_ms(0); }));
  put("bad_budget_over", With(Create(), [](auto& r) { r.set_budget_ms(w::kMaxTimeoutMs + 1); }));
  put("bad_no_operation", Base());

  // ---- create limits (finding 1) ----
  put("bad_create_cpu_zero",
      With(Create(), [](auto& r) { r.mutable_create()->set_cpu_millis(0); }));
  put("bad_create_cpu_over", With(Create(), [](auto& r) {
        r.mutable_create()->set_cpu_millis(w::kMaxCpuMillis + 1);
      }));
  put("bad_create_memory_zero",
      With(Create(), [](auto& r) { r.mutable_create()->set_memory_bytes(0); }));
  put("bad_create_memory_under", With(Create(), [](auto& r) {
        r.mutable_create()->set_memory_bytes(w::kMinMemoryBytes - 1);
      }));
  put("bad_create_memory_over", With(Create(), [](auto& r) {
        r.mutable_create()->set_memory_bytes(w::kMaxMemoryBytes + 1);
      }));
  put("bad_create_sandbox_id_not_uuid", With(Create(), [](auto& r) {
        r.mutable_create()->set_sandbox_id("my-sandbox");
      }));
  put("bad_create_sandbox_id_nul", With(Create(), [](auto& r) {
        r.mutable_create()->set_sandbox_id(
            std::string("11111111-2222-4333-8444-55555555555\0", 36));
      }));
  put("bad_create_image_nul", With(Create(), [](auto& r) {
        r.mutable_create()->set_image(std::string("busybox\0", 8));
      }));
  put("bad_create_image_long", Create(std::string(w::kMaxImageNameBytes + 1, 'i')));
  put("bad_create_commands_over", With(Create(), [](auto& r) {
        for (size_t i = 0; i < w::kMaxCommandArgs; ++i) r.mutable_create()->add_command("a");
      }));
  put("bad_create_command_arg_long", With(Create(), [&](auto& r) {
        r.mutable_create()->add_command(big_arg + "y");
      }));
  put("bad_create_command_nul", With(Create(), [](auto& r) {
        r.mutable_create()->add_command(std::string("a\0b", 3));
      }));
  put("bad_create_env_key_digit", With(Create(), [](auto& r) {
        (*r.mutable_create()->mutable_env())["1PATH"] = "x";
      }));
  put("bad_create_env_key_equals", With(Create(), [](auto& r) {
        (*r.mutable_create()->mutable_env())["A=B"] = "x";
      }));
  put("bad_create_env_key_empty", With(Create(), [](auto& r) {
        (*r.mutable_create()->mutable_env())[""] = "x";
      }));
  put("bad_create_env_value_nul", With(Create(), [](auto& r) {
        (*r.mutable_create()->mutable_env())["X"] = std::string("a\0", 2);
      }));
  put("bad_create_env_over", With(Create(), [](auto& r) {
        for (size_t i = 0; i <= w::kMaxEnvEntries; ++i) {
          (*r.mutable_create()->mutable_env())["E" + std::to_string(i)] = "v";
        }
      }));

  // ---- unknown fields (field 4 was the agent-supplied limits) ----
  put("bad_unknown_field_limits", With(Create(), [](auto& r) {
        Unknown(&r)->AddLengthDelimited(4, std::string("\x08\x00", 2));
      }));
  put("bad_unknown_field_in_create", With(Create(), [](auto& r) {
        Unknown(r.mutable_create())->AddVarint(99, 1);
      }));
  put("bad_unknown_field_in_kill", With(Sandbox(&pb::ExecuteRequest::mutable_kill), [](auto& r) {
        Unknown(r.mutable_kill())->AddVarint(2, 1);
      }));

  // ---- exec / write_file / read_file, payload_bytes lies ----
  put("bad_exec_payload_negative", Exec(-1));
  put("bad_exec_payload_over", Exec(static_cast<int64_t>(w::kMaxStdinBytes) + 1));
  put("bad_exec_payload_int64_max", Exec(INT64_MAX));
  put("bad_exec_stdin_inline", With(Exec(0), [](auto& r) { r.mutable_exec()->set_stdin("abc"); }));
  put("bad_exec_stdin_inline_and_declared",
      With(Exec(3), [](auto& r) { r.mutable_exec()->set_stdin("abc"); }));
  put("bad_exec_no_argv", With(Exec(0), [](auto& r) { r.mutable_exec()->clear_argv(); }));
  put("bad_exec_argv_over", With(Exec(0), [](auto& r) {
        for (size_t i = 0; i < w::kMaxExecArgv; ++i) r.mutable_exec()->add_argv("a");
      }));
  put("bad_exec_output_limit_over", With(Exec(0), [](auto& r) {
        r.mutable_exec()->set_output_limit_bytes(w::kMaxOutputLimitBytes + 1);
      }));
  put("bad_exec_output_limit_negative", With(Exec(0), [](auto& r) {
        r.mutable_exec()->set_output_limit_bytes(-1);
      }));
  put("bad_write_file_payload_over",
      WriteFile("/a", static_cast<int64_t>(w::kMaxFileContentBytes) + 1));
  put("bad_write_file_content_inline", With(WriteFile("/a", 0), [](auto& r) {
        r.mutable_write_file()->set_content("data");
      }));
  put("bad_write_file_path_root", WriteFile("/", 1));
  put("bad_write_file_path_relative", WriteFile("etc/passwd", 1));
  put("bad_write_file_path_dotdot", WriteFile("/a/../../etc/shadow", 1));
  put("bad_write_file_path_empty_component", WriteFile("/a//b", 1));
  put("bad_write_file_path_trailing_slash", WriteFile("/a/", 1));
  put("bad_write_file_path_nul", WriteFile(std::string("/a\0/b", 5), 1));
  put("bad_write_file_path_long", WriteFile("/" + std::string(w::kMaxPathBytes, 'p'), 1));
  put("bad_write_file_mode_setuid", With(WriteFile("/a", 1), [](auto& r) {
        r.mutable_write_file()->set_mode(04755);
      }));
  put("bad_write_file_mode_negative", With(WriteFile("/a", 1), [](auto& r) {
        r.mutable_write_file()->set_mode(-1);
      }));
  put("bad_read_file_max_over", ReadFile("/a", w::kMaxReadFileBytes + 1));
  put("bad_read_file_max_negative", ReadFile("/a", -1));
  put("bad_read_file_path_dot", ReadFile("/a/./b", 1));
  put("bad_kill_with_payload", With(Sandbox(&pb::ExecuteRequest::mutable_kill),
                                    [](auto& r) { r.set_payload_bytes(10); }));
  put("bad_inspect_sandbox_id_uppercase",
      Sandbox(&pb::ExecuteRequest::mutable_inspect, "11111111-2222-4333-8444-55555555555A"));
  put("bad_resume_sandbox_id_short", With(Base(), [](auto& r) {
        r.mutable_resume()->set_sandbox_id("11111111-2222-4333-8444-5555555555");
      }));

  std::fprintf(stderr, "wrote %d seeds to %s\n", written, dir.c_str());
  return 0;
}
