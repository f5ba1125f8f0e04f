// `release rootfs` (tools/release/rootfs.h), run as an operator runs it, on `docker save`
// archives this test writes with libarchive (manifest.json, a config, layer tars; no dockerd).
// Every case reads the image back with debugfs (no loop device) and asserts its bytes:
// determinism, layer order, whiteouts, owners and modes, hostile layers, image choice.
// Needs root (owners, device nodes): skips loudly otherwise, fails under CI=true.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <clocale>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "gtest/gtest.h"

extern char** environ;

namespace sn::release::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kDebugfs[] = "/usr/sbin/debugfs";
constexpr char kE2fsck[] = "/usr/sbin/e2fsck";

// ---------------------------------------------------------------------------------------------
// Processes.

struct Ran {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Ran Spawn(std::vector<std::string> argv, const std::string& scratch) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const std::string out = scratch + "/spawn.out", err = scratch + "/spawn.err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  Ran r;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << argv[0];
  if (rc != 0) return r;
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadAll(out);
  r.err = ReadAll(err);
  unlink(out.c_str());
  unlink(err.c_str());
  return r;
}

// ---------------------------------------------------------------------------------------------
// Tar archives.

struct Entry {
  std::string name;
  mode_t type = AE_IFREG;  // AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR, AE_IFIFO
  int perm = 0644;
  std::string data;
  std::string symlink;
  std::string hardlink;
  int64_t uid = 0;
  int64_t gid = 0;
  int major = 0;
  int minor = 0;
  std::string uname;  // written but never used by the tool (owners are numbers)
};

Entry Make(const std::string& name, mode_t type, int perm) {
  Entry e;
  e.name = name;
  e.type = type;
  e.perm = perm;
  return e;
}
Entry Dir(const std::string& name, int perm = 0755) { return Make(name, AE_IFDIR, perm); }
Entry File(const std::string& name, const std::string& data, int perm = 0644) {
  Entry e = Make(name, AE_IFREG, perm);
  e.data = data;
  return e;
}
Entry Symlink(const std::string& name, const std::string& target) {
  Entry e = Make(name, AE_IFLNK, 0777);
  e.symlink = target;
  return e;
}
Entry Hardlink(const std::string& name, const std::string& target) {
  Entry e = Make(name, AE_IFREG, 0644);
  e.hardlink = target;
  return e;
}

la_ssize_t AppendTo(archive*, void* client, const void* buf, size_t n) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

void WriteEntry(archive* a, const Entry& e, time_t mtime) {
  archive_entry* ae = archive_entry_new();
  archive_entry_set_pathname_utf8(ae, e.name.c_str());
  archive_entry_set_filetype(ae, e.type);
  archive_entry_set_perm(ae, e.perm);
  archive_entry_set_uid(ae, e.uid);
  archive_entry_set_gid(ae, e.gid);
  if (!e.uname.empty()) {
    archive_entry_set_uname(ae, e.uname.c_str());
    archive_entry_set_gname(ae, e.uname.c_str());
  }
  archive_entry_set_mtime(ae, mtime, 123456789);
  if (!e.symlink.empty()) archive_entry_set_symlink(ae, e.symlink.c_str());
  if (!e.hardlink.empty()) archive_entry_set_hardlink(ae, e.hardlink.c_str());
  if (e.type == AE_IFCHR) {
    archive_entry_set_rdevmajor(ae, e.major);
    archive_entry_set_rdevminor(ae, e.minor);
  }
  archive_entry_set_size(ae, static_cast<la_int64_t>(e.data.size()));
  ASSERT_EQ(archive_write_header(a, ae), ARCHIVE_OK) << archive_error_string(a);
  if (!e.data.empty()) {
    ASSERT_EQ(archive_write_data(a, e.data.data(), e.data.size()),
              static_cast<la_ssize_t>(e.data.size()));
  }
  archive_entry_free(ae);
}

std::string Tar(const std::vector<Entry>& entries, bool gzip = false) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (gzip) archive_write_add_filter_gzip(a);
  EXPECT_EQ(archive_write_open(a, &out, nullptr, AppendTo, nullptr), ARCHIVE_OK);
  for (const Entry& e : entries) WriteEntry(a, e, time(nullptr));
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

struct Image {
  std::vector<std::string> tags;
  std::vector<std::string> layers;  // tar bytes, lowest first
};

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string JsonList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + Quote(items[i]);
  return out + "]";
}

// A `docker save` archive in Docker 25's layout: blobs/sha256/<digest> and manifest.json.
std::string DockerSave(const std::vector<Image>& images) {
  std::vector<Entry> members = {Dir("blobs"), Dir("blobs/sha256")};
  std::set<std::string> added;
  auto blob = [&](const std::string& bytes) {
    const std::string name = "blobs/sha256/" + Sha256Hex(bytes);
    if (added.insert(name).second) members.push_back(File(name, bytes));
    return name;
  };
  std::string manifest = "[";
  for (size_t i = 0; i < images.size(); ++i) {
    std::vector<std::string> layer_names, diff_ids;
    for (const std::string& l : images[i].layers) {
      layer_names.push_back(blob(l));
      diff_ids.push_back("sha256:" + Sha256Hex(l));
    }
    const std::string config = blob(
        R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":)" +
        JsonList(diff_ids) + "}}");
    manifest += (i ? "," : "") + std::string(R"({"Config":)") + Quote(config) +
                R"(,"RepoTags":)" + JsonList(images[i].tags) + R"(,"Layers":)" +
                JsonList(layer_names) + "}";
  }
  members.push_back(File("manifest.json", manifest + "]"));
  return Tar(members);
}

// ---------------------------------------------------------------------------------------------
// A tree on disk equal to what a list of entries extracts to.

void Materialize(const std::string& root, const std::vector<Entry>& entries) {
  for (const Entry& e : entries) {
    const std::string p = root + "/" + e.name;
    if (!e.hardlink.empty()) {
      ASSERT_EQ(link((root + "/" + e.hardlink).c_str(), p.c_str()), 0) << p;
      continue;
    }
    switch (e.type) {
      case AE_IFDIR: ASSERT_EQ(mkdir(p.c_str(), 0700), 0) << p; break;
      case AE_IFLNK: ASSERT_EQ(symlink(e.symlink.c_str(), p.c_str()), 0) << p; break;
      case AE_IFCHR:
        ASSERT_EQ(mknod(p.c_str(), S_IFCHR | 0600, makedev(e.major, e.minor)), 0) << p;
        break;
      case AE_IFIFO: ASSERT_EQ(mkfifo(p.c_str(), 0600), 0) << p; break;
      default: {
        std::ofstream(p, std::ios::binary) << e.data;
      }
    }
    ASSERT_EQ(lchown(p.c_str(), e.uid, e.gid), 0) << p;
    if (e.type != AE_IFLNK) {
      ASSERT_EQ(chmod(p.c_str(), e.perm), 0) << p;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The image, through debugfs.

class RootfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      const char* ci = getenv("CI");
      if (ci != nullptr && std::string(ci) == "true") {
        FAIL() << "release rootfs needs root (owners, device nodes) and CI=true";
      }
      GTEST_SKIP() << "SKIPPED LOUDLY: release rootfs needs root (set CI=true to fail)";
    }
    // Entry names are written as UTF-8 PAX records, as Docker writes them.
    ASSERT_NE(std::setlocale(LC_CTYPE, "C.UTF-8"), nullptr);
    const char* tmp = getenv("TEST_TMPDIR");
    std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/rootfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    base_ = tmpl;
  }
  void TearDown() override {
    if (!base_.empty()) fs::remove_all(base_);
  }

  std::string NewDir(const std::string& name) {
    const std::string d = base_ + "/" + name;
    fs::create_directories(d);
    return d;
  }
  std::string WriteArchive(const std::string& dir, const std::string& bytes) {
    const std::string path = dir + "/image.tar";
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  Ran Release(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"tools/release/release", "rootfs"};
    argv.insert(argv.end(), args.begin(), args.end());
    return Spawn(argv, base_);
  }
  // Builds `output` from `archive` and checks the printed digest and size against the file.
  std::string Build(const std::string& archive_or_dir, const std::string& output,
                    bool dir = false) {
    Ran r = Release({(dir ? "--dir=" : "--docker-archive=") + archive_or_dir,
                     "--output=" + output});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string bytes = ReadAll(output);
    EXPECT_EQ(r.out, "sha256:" + Sha256Hex(bytes) + " " + std::to_string(bytes.size()) + " " +
                         output + "\n");
    Ran fsck = Spawn({kE2fsck, "-fn", output}, base_);
    EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
    return bytes;
  }
  std::string Debugfs(const std::string& image, const std::string& command) {
    return Spawn({kDebugfs, "-R", command, image}, base_).out;
  }
  // The value after `field` in debugfs's `stat` of `path` ("" when missing).
  std::string Stat(const std::string& image, const std::string& path, const std::string& field) {
    const std::string out = Debugfs(image, "stat " + path);
    const size_t at = out.find(field);
    if (at == std::string::npos) return "";
    std::istringstream rest(out.substr(at + field.size()));
    std::string value;
    rest >> value;
    return value;
  }
  bool Exists(const std::string& image, const std::string& path) {
    return !Stat(image, path, "Inode:").empty();
  }
  // The names in directory `dir` of the image (`ls -p`), without "." and "..".
  std::set<std::string> Names(const std::string& image, const std::string& dir) {
    std::set<std::string> names;
    std::istringstream in(Debugfs(image, "ls -p " + dir));
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f;
      std::stringstream ss(line);
      for (std::string part; std::getline(ss, part, '/');) f.push_back(part);
      if (f.size() >= 6 && f[5] != "." && f[5] != "..") names.insert(f[5]);
    }
    return names;
  }
  // Entries of `dir` (recursively) other than the archive: nothing but it is left there.
  std::set<std::string> Leftovers(const std::string& dir) {
    std::set<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.path().filename() != "image.tar") out.insert(e.path().string());
    }
    return out;
  }

  std::string base_;
};

// The rich tree of the determinism and ownership cases.
std::vector<Entry> RichTree() {
  Entry su = File("bin/su", "#!/bin/sh\necho su\n", 04755);
  su.uid = 1234;
  su.gid = 5678;
  su.uname = "root";  // names are never looked up: the owner stays 1234:5678
  Entry null = Make("dev/null", AE_IFCHR, 0666);
  null.major = 1;
  null.minor = 3;
  const Entry fifo = Make("run/fifo", AE_IFIFO, 0600);
  return {Dir("bin"), su, Dir("dev"), null, Dir("etc"), File("etc/motd", "hello\n"),
          Dir("private", 0700), File("private/key", "k", 0600), Dir("run"), fifo,
          Dir("srv", 02775), Dir("tmp", 01777), File("caf\xc3\xa9", "utf-8 name\n"),
          Symlink("sh", "bin/su"), Hardlink("bin/su2", "bin/su")};
}

TEST_F(RootfsTest, BuildsAreByteIdenticalAcrossTimesDirectoriesAndRoutes) {
  const std::string in = NewDir("in");
  const std::string archive =
      WriteArchive(in, DockerSave({{{"sn-rich:1"}, {Tar(RichTree())}}}));
  const std::string first = Build(archive, NewDir("out1") + "/rootfs.ext4");
  sleep(2);  // other wall-clock seconds for every time the extraction and mke2fs see
  const std::string second = Build(archive, NewDir("out2") + "/other-name.img");
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.size() % (1 << 20), 0u);
  EXPECT_TRUE(first == second) << "two builds of one archive differ";

  // The same tree made by hand, twice, in other orders and at other times: the same bytes.
  std::vector<Entry> forward = RichTree();
  std::vector<Entry> reordered = forward;
  std::stable_sort(reordered.begin(), reordered.end() - 1, [](const Entry& a, const Entry& b) {
    return std::count(a.name.begin(), a.name.end(), '/') <
           std::count(b.name.begin(), b.name.end(), '/');
  });
  std::reverse(reordered.begin(), reordered.begin() + 8);  // top-level entries, reversed
  const std::string tree1 = NewDir("tree1"), tree2 = NewDir("tree2");
  Materialize(tree1, forward);
  sleep(1);
  Materialize(tree2, reordered);
  const std::string from_dir1 = Build(tree1, NewDir("out3") + "/a.ext4", /*dir=*/true);
  const std::string from_dir2 = Build(tree2, NewDir("out4") + "/b.ext4", /*dir=*/true);
  EXPECT_TRUE(from_dir1 == from_dir2) << "two builds of equivalent trees differ";
  EXPECT_TRUE(from_dir1 == first) << "the tree and the archive of the same files differ";
}

// A default POSIX ACL (user 1234: rwx) in the kernel's xattr format.
std::string DefaultAcl() {
  struct AclEntry {
    uint16_t tag;
    uint16_t perm;
    uint32_t id;
  };
  const uint32_t version = 2;
  const AclEntry entries[] = {{0x01, 7, UINT32_MAX}, {0x02, 7, 1234}, {0x04, 5, UINT32_MAX},
                              {0x10, 7, UINT32_MAX}, {0x20, 5, UINT32_MAX}};
  std::string acl(reinterpret_cast<const char*>(&version), sizeof version);
  acl.append(reinterpret_cast<const char*>(entries), sizeof entries);
  return acl;
}

TEST_F(RootfsTest, ADefaultAclOnTheOutputDirectoryDoesNotReachTheImage) {
  const std::string in = NewDir("in");
  const std::string archive = WriteArchive(
      in, DockerSave({{{"sn-acl:1"}, {Tar({Dir("d"), File("d/f", "x", 0640)}),
                                      Tar({File("implicit/dir/f", "y", 0600)})}}}));
  const std::string plain = Build(archive, NewDir("plain") + "/rootfs.ext4");
  const std::string acl_dir = NewDir("acl");
  const std::string acl = DefaultAcl();
  if (setxattr(acl_dir.c_str(), "system.posix_acl_default", acl.data(), acl.size(), 0) != 0) {
    GTEST_SKIP() << "SKIPPED: this file system takes no POSIX ACL: " << strerror(errno);
  }
  const std::string img = acl_dir + "/rootfs.ext4";
  EXPECT_TRUE(Build(archive, img) == plain) << "the host's ACL changed the image";
  EXPECT_EQ(Stat(img, "/implicit", "Mode:"), "0755");
  EXPECT_EQ(Stat(img, "/d/f", "File ACL:"), "0");  // no extended-attribute block
}

TEST_F(RootfsTest, OwnersModesLinksAndSpecialFilesArriveAsTheyWere) {
  const std::string in = NewDir("in");
  const std::string archive = WriteArchive(in, DockerSave({{{"sn-rich:1"}, {Tar(RichTree())}}}));
  const std::string img = NewDir("out") + "/rootfs.ext4";
  Build(archive, img);
  EXPECT_EQ(Stat(img, "/bin/su", "Type:"), "regular");
  EXPECT_EQ(Stat(img, "/bin/su", "Mode:"), "04755");
  EXPECT_EQ(Stat(img, "/bin/su", "User:"), "1234");
  EXPECT_EQ(Stat(img, "/bin/su", "Group:"), "5678");
  EXPECT_EQ(Stat(img, "/bin/su", "Links:"), "2");
  EXPECT_EQ(Stat(img, "/bin/su2", "Inode:"), Stat(img, "/bin/su", "Inode:"));
  EXPECT_EQ(Debugfs(img, "cat /bin/su2"), "#!/bin/sh\necho su\n");
  EXPECT_EQ(Stat(img, "/private", "Mode:"), "0700");
  EXPECT_EQ(Stat(img, "/private/key", "Mode:"), "0600");
  EXPECT_EQ(Stat(img, "/srv", "Mode:"), "02775");
  EXPECT_EQ(Stat(img, "/tmp", "Mode:"), "01777");
  EXPECT_EQ(Stat(img, "/sh", "Type:"), "symlink");
  EXPECT_EQ(Stat(img, "/sh", "Fast link dest:"), "\"bin/su\"");
  EXPECT_EQ(Stat(img, "/dev/null", "Type:"), "character");
  EXPECT_EQ(Stat(img, "/dev/null", "Mode:"), "0666");
  EXPECT_EQ(Stat(img, "/dev/null", "Device major/minor number:"), "01:03");
  EXPECT_EQ(Stat(img, "/run/fifo", "Type:"), "FIFO");
  EXPECT_EQ(Stat(img, "/run/fifo", "Mode:"), "0600");
  EXPECT_EQ(Debugfs(img, "cat /caf\xc3\xa9"), "utf-8 name\n");
  // Every time is the epoch (1 without SOURCE_DATE_EPOCH), whatever the tar said.
  for (const char* t : {"ctime:", "atime:", "mtime:", "crtime:"}) {
    EXPECT_EQ(Stat(img, "/etc/motd", t), "0x00000001:00000000") << t;
  }
  EXPECT_EQ(Stat(img, "/", "User:"), "0");
  EXPECT_EQ(Stat(img, "/", "Mode:"), "0755");
}

TEST_F(RootfsTest, UpperLayersReplaceLowerOnesInOrder) {
  const std::string lower = Tar({Dir("etc"), File("etc/motd", "lower\n"),
                                 File("etc/only-lower", "l\n"), Dir("etc/d"),
                                 File("etc/d/inside", "x"), File("etc/was-file", "f")});
  const std::string middle = Tar({Dir("etc"), File("etc/motd", "middle\n")});
  // The top layer is gzip-compressed; a directory becomes a file and a file a directory.
  const std::string upper =
      Tar({Dir("etc"), File("etc/motd", "upper\n"), File("etc/d", "now a file"),
           Dir("etc/was-file"), File("etc/was-file/x", "y")},
          /*gzip=*/true);
  const std::string in = NewDir("in");
  const std::string archive =
      WriteArchive(in, DockerSave({{{"sn-order:1"}, {lower, middle, upper}}}));
  const std::string img = NewDir("out") + "/rootfs.ext4";
  Build(archive, img);
  EXPECT_EQ(Debugfs(img, "cat /etc/motd"), "upper\n");
  EXPECT_EQ(Debugfs(img, "cat /etc/only-lower"), "l\n");
  EXPECT_EQ(Stat(img, "/etc/d", "Type:"), "regular");
  EXPECT_EQ(Debugfs(img, "cat /etc/d"), "now a file");
  EXPECT_EQ(Stat(img, "/etc/was-file", "Type:"), "directory");
  EXPECT_EQ(Debugfs(img, "cat /etc/was-file/x"), "y");
}

TEST_F(RootfsTest, WhiteoutsDeleteAndOpaqueDirectoriesHideOnlyLowerLayers) {
  const std::string lower =
      Tar({Dir("a"), File("a/x", "gone"), File("a/keep", "kept"), Dir("a/sub"),
           File("a/sub/deep", "gone too"), Dir("opq"), File("opq/lower1", "hidden"),
           Dir("opq/sub"), File("opq/sub/lower2", "hidden"), File("top", "t")});
  const std::string upper =
      Tar({Dir("a"), File("a/.wh.x", ""), File("a/.wh.sub", ""), Dir("opq"),
           File("opq/upper-before", "1"), Dir("opq/sub"), File("opq/.wh..wh..opq", ""),
           File("opq/upper-after", "2"), File("a/.wh..wh.plnk", ""), File("new", "n"),
           File(".wh.top", "")});
  const std::string in = NewDir("in");
  const std::string archive = WriteArchive(in, DockerSave({{{"sn-wh:1"}, {lower, upper}}}));
  const std::string img = NewDir("out") + "/rootfs.ext4";
  Build(archive, img);
  EXPECT_EQ(Names(img, "/a"), (std::set<std::string>{"keep"}));
  EXPECT_EQ(Debugfs(img, "cat /a/keep"), "kept");
  EXPECT_EQ(Names(img, "/opq"), (std::set<std::string>{"sub", "upper-after", "upper-before"}));
  EXPECT_EQ(Names(img, "/opq/sub"), std::set<std::string>{});  // re-created, lower's hidden
  EXPECT_EQ(Debugfs(img, "cat /opq/upper-before"), "1");
  EXPECT_EQ(Names(img, "/"), (std::set<std::string>{"a", "lost+found", "new", "opq"}));
}

TEST_F(RootfsTest, HostileLayersAreRefusedAndWriteNothing) {
  const std::string outside = NewDir("outside");
  std::ofstream(outside + "/secret") << "host file";
  struct Case {
    std::string what;
    std::vector<std::string> layers;
    std::string named;  // the entry the refusal names
  };
  const std::vector<Case> cases = {
      {"dotdot", {Tar({File("../../escape", "x")})}, "../../escape"},
      {"absolute", {Tar({File(base_ + "/abs-escape", "x")})}, base_ + "/abs-escape"},
      {"through a symlink",
       {Tar({Symlink("evil", outside)}), Tar({File("evil/pwned", "x")})}, "evil/pwned"},
      {"same-layer symlink", {Tar({Symlink("evil", outside), File("evil/pwned", "x")})},
       "evil/pwned"},
      {"hard link through a symlink",
       {Tar({Symlink("evil", outside)}), Tar({Hardlink("stolen", "evil/secret")})}, "stolen"},
      {"whiteout through a symlink",
       {Tar({Symlink("evil", outside)}), Tar({File("evil/.wh.secret", "")})}, "evil/.wh.secret"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string dir = NewDir("case");
    const std::string archive = WriteArchive(dir, DockerSave({{{"sn-evil:1"}, c.layers}}));
    const std::string img = dir + "/rootfs.ext4";
    Ran r = Release({"--docker-archive=" + archive, "--output=" + img});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("\"" + c.named + "\""), std::string::npos) << r.err;
    EXPECT_TRUE(Leftovers(dir).empty());  // no image, no throwaway directory, no escapee
    EXPECT_EQ(Leftovers(outside), (std::set<std::string>{outside + "/secret"}));
    EXPECT_EQ(ReadAll(outside + "/secret"), "host file");
    EXPECT_FALSE(fs::exists(base_ + "/abs-escape"));
    EXPECT_FALSE(fs::exists(base_ + "/escape"));
    fs::remove_all(dir);
  }
}

TEST_F(RootfsTest, AnArchiveOfTwoImagesNeedsImageAndNamesBothTags) {
  const std::string in = NewDir("in");
  const std::string archive =
      WriteArchive(in, DockerSave({{{"sn-a:1"}, {Tar({File("which", "a")})}},
                                   {{"sn-b:2"}, {Tar({File("which", "b")})}}}));
  const std::string out = NewDir("out");
  Ran r = Release({"--docker-archive=" + archive, "--output=" + out + "/rootfs.ext4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("\"sn-a:1\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\"sn-b:2\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--image"), std::string::npos) << r.err;
  EXPECT_TRUE(Leftovers(out).empty());

  Ran unknown = Release({"--docker-archive=" + archive, "--image=sn-c:3",
                         "--output=" + out + "/rootfs.ext4"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("\"sn-c:3\""), std::string::npos) << unknown.err;

  Ran b = Release({"--docker-archive=" + archive, "--image=sn-b:2", "--output=" + out + "/b",
                   "--size-mib=16"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(Debugfs(out + "/b", "cat /which"), "b");
  EXPECT_EQ(fs::file_size(out + "/b"), 16u << 20);
}

TEST_F(RootfsTest, ReadsDockersLegacyLayoutWithALayerMemberThatLinksToAnother) {
  const std::string manifest =
      R"([{"Config":"c.json","RepoTags":null,"Layers":["l0/layer.tar","l1/layer.tar"]}])";
  const std::string in = NewDir("in");
  const std::string archive = WriteArchive(
      in, Tar({Dir("l0"), File("l0/layer.tar", Tar({File("x/y/file", "hi", 0640)})), Dir("l1"),
               Symlink("l1/layer.tar", "../l0/layer.tar"), File("c.json", "{}"),
               File("manifest.json", manifest)}));
  const std::string img = NewDir("out") + "/rootfs.ext4";
  Build(archive, img);
  EXPECT_EQ(Debugfs(img, "cat /x/y/file"), "hi");
  EXPECT_EQ(Stat(img, "/x/y/file", "Mode:"), "0640");
  EXPECT_EQ(Stat(img, "/x", "Mode:"), "0755");  // made implicitly
}

TEST_F(RootfsTest, UsageErrorsExitTwo) {
  const std::string out = NewDir("out") + "/x.ext4";
  EXPECT_EQ(Release({"--output=" + out}).exit_code, 2);
  EXPECT_EQ(Release({"--dir=/nonexistent"}).exit_code, 2);
  EXPECT_EQ(Release({"--dir=" + base_, "--docker-archive=x.tar", "--output=" + out}).exit_code,
            2);
  EXPECT_EQ(Release({"--dir=" + base_, "--image=a:1", "--output=" + out}).exit_code, 2);
  EXPECT_EQ(Release({"--dir=" + base_, "--size-mib=lots", "--output=" + out}).exit_code, 2);
  EXPECT_EQ(Release({"--dir=" + base_, "--output=" + out, "image=x"}).exit_code, 2);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace sn::release::testing
