// The real guest: the repository's kernel and guest agent initramfs booted by qemu
// (-M microvm, TCG) with a busybox root filesystem disk, driven through the host end of the
// guest channel. Needs qemu-system-x86_64, mke2fs and busybox-static; skips loudly without
// them unless CI=true (then it fails).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "privhelper/native/microvm/guest_channel.h"
#include "tests/privhelper/native/microvm/guest_fixture.h"

namespace sn::microvm {
namespace {

using guest::v1::FromGuest;
using guest::v1::ToGuest;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class GuestBootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = testing::MissingTool(); !why.empty()) GTEST_SKIP() << why;
    if (HasFailure()) return;
    // Under /tmp, not TEST_TMPDIR: a unix socket's path has at most 107 bytes.
    char tmpl[] = "/tmp/sn-guest-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(testing::MakeBusyboxImage(dir_, dir_ + "/root.ext4"));
    ASSERT_EQ(chmod((dir_ + "/root.ext4").c_str(), 0644), 0);  // this test's own copy
    StartQemu();
  }

  void TearDown() override {
    if (qemu_ > 0) {
      kill(qemu_, SIGKILL);
      waitpid(qemu_, nullptr, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void StartQemu() {
    socket_ = dir_ + "/agent.sock";
    const std::string kernel = testing::KernelPath();
    const std::string initrd = testing::InitramfsPath();
    std::vector<std::string> argv = {
        testing::kQemu, "-M", "microvm,acpi=off", "-bios", testing::kFirmware, "-accel", "tcg", "-m", "96", "-smp", "1",
        "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
        "-serial", "file:" + dir_ + "/console.log",
        "-kernel", kernel, "-initrd", initrd,
        "-append", "console=ttyS0 reboot=t panic=-1 sn.root=/dev/vda",
        "-drive", "id=root,file=" + dir_ + "/root.ext4,format=raw,if=none",
        "-device", "virtio-blk-device,drive=root",
        "-device", "virtio-serial-device",
        "-chardev", "socket,id=agent,path=" + socket_ + ",server=on,wait=off",
        "-device", "virtserialport,chardev=agent,name=sn.agent"};
    qemu_started_ = absl::Now();
    qemu_ = fork();
    if (qemu_ == 0) {
      std::vector<char*> av;
      for (std::string& a : argv) av.push_back(a.data());
      av.push_back(nullptr);
      execv(av[0], av.data());
      _exit(127);
    }
    ASSERT_GT(qemu_, 0);
    // ConnectAndHandshake waits for qemu's socket and then for the booted guest's Ready.
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    const absl::Time start = qemu_started_;
    absl::StatusOr<std::unique_ptr<GuestChannel>> c =
        GuestChannel::ConnectAndHandshake(socket_, deadline, &ready_);
    ASSERT_TRUE(c.ok()) << c.status() << "\nconsole:\n" << ReadAll(dir_ + "/console.log");
    channel_ = *std::move(c);
    std::printf("guest ready %.0f ms after qemu started (kernel %s)\n",
                absl::ToDoubleMilliseconds(absl::Now() - start), ready_.kernel_release().c_str());
  }

  FromGuest Call(ToGuest r) {
    absl::StatusOr<FromGuest> a = channel_->Call(std::move(r), absl::Now() + absl::Seconds(60));
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : FromGuest();
  }

  FromGuest Exec(std::vector<std::string> argv, std::string stdin_bytes = "",
                 int64_t limit = 1 << 20) {
    ToGuest r;
    for (const std::string& a : argv) r.mutable_exec()->add_argv(a);
    r.mutable_exec()->set_stdin(stdin_bytes);
    r.mutable_exec()->set_output_limit_bytes(limit);
    r.mutable_exec()->set_timeout_ms(30000);
    return Call(r);
  }

  std::string dir_;
  std::string socket_;
  pid_t qemu_ = -1;
  absl::Time qemu_started_;
  std::unique_ptr<GuestChannel> channel_;
  guest::v1::Ready ready_;
};

TEST_F(GuestBootTest, TheGuestRunsItsOwnKernelAndAnswersEveryRequest) {
  EXPECT_TRUE(absl::EndsWith(ready_.kernel_release(), "-sandbox-node")) << ready_.kernel_release();
  EXPECT_FALSE(ready_.main_running());

  FromGuest uname = Exec({"uname", "-r"});
  EXPECT_EQ(uname.exec().stdout(), ready_.kernel_release() + "\n");
  EXPECT_EQ(uname.exec().exit_code(), 0);

  FromGuest sh = Exec({"sh", "-c", "cat; echo err >&2; exit 3"}, "from stdin\n");
  EXPECT_EQ(sh.exec().stdout(), "from stdin\n");
  EXPECT_EQ(sh.exec().stderr(), "err\n");
  EXPECT_EQ(sh.exec().exit_code(), 3);

  FromGuest missing = Exec({"no-such-program"});
  EXPECT_EQ(missing.exec().exit_code(), 127);

  FromGuest limited = Exec({"sh", "-c", "echo 0123456789"}, "", 4);
  EXPECT_EQ(limited.exec().stdout(), "0123");
  EXPECT_TRUE(limited.exec().truncated());

  ToGuest w;
  w.mutable_write_file()->set_path("/root/note");
  w.mutable_write_file()->set_content("written by the host");
  w.mutable_write_file()->set_mode(0640);
  EXPECT_EQ(Call(w).write_file().size(), 19);
  EXPECT_EQ(Exec({"cat", "/root/note"}).exec().stdout(), "written by the host");

  ToGuest r;
  r.mutable_read_file()->set_path("/etc/hostname");
  r.mutable_read_file()->set_max_bytes(4);
  FromGuest read = Call(r);
  EXPECT_EQ(read.read_file().content(), "sand");
  EXPECT_EQ(read.read_file().size(), 8);
  EXPECT_TRUE(read.read_file().truncated());
}

// The guest agent spawns with vfork and searches PATH itself (process.cc): execvpe's rules,
// in the sandbox's own environment.
TEST_F(GuestBootTest, ExecSearchesTheSandboxsPathAsExecvpeDoes) {
  auto exec_with_path = [&](std::vector<std::string> argv, const std::string& path) {
    ToGuest r;
    for (const std::string& a : argv) r.mutable_exec()->add_argv(a);
    if (!path.empty()) (*r.mutable_exec()->mutable_env())["PATH"] = path;
    r.mutable_exec()->set_output_limit_bytes(1 << 20);
    r.mutable_exec()->set_timeout_ms(30000);
    return Call(r).exec();
  };
  auto write = [&](const std::string& path, const std::string& content, uint32_t mode) {
    ToGuest w;
    w.mutable_write_file()->set_path(path);
    w.mutable_write_file()->set_content(content);
    w.mutable_write_file()->set_mode(mode);
    ASSERT_EQ(Call(w).answer_case(), FromGuest::kWriteFile);
  };

  // Not found: 127, said on stderr as a shell says it.
  guest::v1::ExecResult missing = exec_with_path({"no-such-program"}, "");
  EXPECT_EQ(missing.exit_code(), 127);
  EXPECT_EQ(missing.stderr(), "no-such-program: No such file or directory\n");
  // The sandbox's PATH, in order, past directories that do not exist.
  guest::v1::ExecResult found = exec_with_path({"echo", "found"}, "/no/such/dir:/bin");
  EXPECT_EQ(found.exit_code(), 0);
  EXPECT_EQ(found.stdout(), "found\n");
  EXPECT_EQ(exec_with_path({"echo"}, "/no/such/dir").exit_code(), 127);
  // A file without execute permission is remembered (126, EACCES) unless a later entry runs.
  write("/root/tool", "#!/bin/sh\necho no\n", 0644);
  guest::v1::ExecResult denied = exec_with_path({"tool"}, "/root:/no/such/dir");
  EXPECT_EQ(denied.exit_code(), 126);
  EXPECT_EQ(denied.stderr(), "tool: Permission denied\n");
  write("/tmp/tool", "#!/bin/sh\necho second\n", 0755);
  EXPECT_EQ(exec_with_path({"tool"}, "/root:/tmp").stdout(), "second\n");
  // A script without "#!" (ENOEXEC) is run by /bin/sh with its arguments.
  write("/root/plain", "echo plain \"$1\"\n", 0755);
  guest::v1::ExecResult plain = exec_with_path({"/root/plain", "arg"}, "");
  EXPECT_EQ(plain.exit_code(), 0);
  EXPECT_EQ(plain.stdout(), "plain arg\n");
  // The environment is the sandbox's own: nothing of the guest agent's leaks in.
  // (The kernel gives the guest agent, PID 1, HOME and TERM.)
  ToGuest env;
  env.mutable_exec()->add_argv("sh");
  env.mutable_exec()->add_argv("-c");
  env.mutable_exec()->add_argv("echo \"$ONLY|$PATH|${HOME-unset}|${TERM-unset}\"");
  (*env.mutable_exec()->mutable_env())["ONLY"] = "this";
  env.mutable_exec()->set_output_limit_bytes(1 << 20);
  env.mutable_exec()->set_timeout_ms(30000);
  EXPECT_EQ(Call(env).exec().stdout(),
            "this|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|unset|unset\n");
}

TEST_F(GuestBootTest, ASymlinkInTheGuestNeverLeadsOutOfTheSandboxRoot) {
  // /init is the guest agent in the initramfs, outside the sandbox root; the root filesystem
  // has none. A symlink to it, however many "..", resolves inside the root: not found.
  ASSERT_EQ(Exec({"ln", "-s", "../../../../init", "/root/escape"}).exec().exit_code(), 0);
  ToGuest r;
  r.mutable_read_file()->set_path("/root/escape");
  r.mutable_read_file()->set_max_bytes(1 << 20);
  FromGuest a = Call(r);
  ASSERT_EQ(a.answer_case(), FromGuest::kError);
  EXPECT_EQ(a.error().code(), guest::v1::ERROR_NOT_FOUND);

  ToGuest w;
  w.mutable_write_file()->set_path("/root/escape");
  w.mutable_write_file()->set_content("x");
  w.mutable_write_file()->set_mode(0644);
  FromGuest wrote = Call(w);  // creates /init inside the root, not over the guest agent
  ASSERT_EQ(wrote.answer_case(), FromGuest::kWriteFile);
  EXPECT_EQ(Exec({"cat", "/init"}).exec().stdout(), "x");
}

TEST_F(GuestBootTest, TheMainProcessRunsAndPoweroffEndsQemu) {
  ToGuest s;
  s.mutable_start()->add_argv("sleep");
  s.mutable_start()->add_argv("1000");
  ASSERT_EQ(Call(s).answer_case(), FromGuest::kDone);
  ToGuest again = s;
  FromGuest conflict = Call(again);
  ASSERT_EQ(conflict.answer_case(), FromGuest::kError);
  EXPECT_EQ(conflict.error().code(), guest::v1::ERROR_CONFLICT);

  ToGuest hello;
  hello.mutable_hello()->set_nonce(42);
  EXPECT_TRUE(Call(hello).ready().main_running());

  ToGuest off;
  off.mutable_poweroff();
  ASSERT_EQ(Call(off).answer_case(), FromGuest::kDone);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(qemu_, &status, WNOHANG)) == 0 && absl::Now() < deadline) {
    usleep(20 * 1000);
  }
  ASSERT_EQ(done, qemu_) << "qemu still runs after the guest powered off";
  qemu_ = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace sn::microvm
