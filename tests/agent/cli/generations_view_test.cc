// `agent generations` (agent/cli/generations_view.h) against an in-process gRPC privhelper and a
// real state directory in a temporary folder: every row, its state, roles, diagnostic,
// references and progress; the exact --json shape; privhelper down; a torn file; and that
// the command changes nothing.
#include "agent/cli/generations_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "agent/generations/pins.h"
#include "agent/generations/progress_file.h"
#include "agent/generations/retention_file.h"
#include "agent/requests/operation_record.h"
#include "agent/state/state_files.h"
#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/agent/fakes/fake_privhelper.h"
#include "tests/release/fixture.h"

namespace sn::agent {
namespace {

namespace pbf = ::sn::privhelper::v1;

std::string D(int g) { return std::string(64, static_cast<char>('0' + g)); }

void Write(const std::string& path, const std::string& text) {
  ASSERT_TRUE(WriteFileAtomically(path, text, 0600).ok()) << path;
}

// Every file under `dir` with its bytes.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  FILE* p = popen(("find " + dir + " -type f | sort").c_str(), "r");
  char line[4096];
  while (p != nullptr && fgets(line, sizeof(line), p) != nullptr) {
    std::string path(line);
    path.pop_back();
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    out[path] = ss.str();
  }
  if (p != nullptr) pclose(p);
  return out;
}

pbf::GenerationDetail* Add(pbf::ListGenerationsResponse* l, int g, pbf::GenerationState s) {
  pbf::GenerationDetail* d = l->add_generations();
  d->mutable_report()->set_generation(g);
  d->mutable_report()->set_specification_digest(D(g));
  d->mutable_report()->set_state(s);
  return d;
}

struct Output {
  int code = -1;
  std::string out;
  std::string err;
};

class GenerationsViewTest : public ::testing::Test {
 protected:
  GenerationsViewTest()
      : privhelper_(release::testing::NewKey().public_key()),
        state_(release::testing::MakeTempDir()) {
    config_.state_dir = state_;
    config_.privhelper_socket = privhelper_.socket;
    StateFiles files(state_);
    EXPECT_TRUE(files.EnsureDirs().ok());
    EXPECT_EQ(mkdir(files.OperationsDir().c_str(), 0700), 0);
  }
  ~GenerationsViewTest() override {
    if (system(("rm -rf " + state_).c_str()) != 0) {
    }
  }

  Output Run(bool json) {
    FILE* out = tmpfile();
    FILE* err = tmpfile();
    Output o;
    o.code = RunGenerationsCommand(config_, json, out, err);
    auto slurp = [](FILE* f) {
      std::string s;
      rewind(f);
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
      fclose(f);
      return s;
    };
    o.out = slurp(out);
    o.err = slurp(err);
    return o;
  }

  // A node that rolled from 1 (serving) to 2 (target) and holds older generations.
  void Populate() {
    StateFiles files(state_);
    Write(files.DeploymentPinsPath(),
          FormatPins(DeploymentPins{GenerationRef{2, D(2)}, GenerationRef{1, D(1)}}));
    const absl::Time t = absl::FromUnixSeconds(1795000000);
    RetentionStatus granted;
    granted.ref = {3, D(3)};
    granted.answered_at = t;
    granted.keep = false;
    granted.granted_at = t;
    granted.collection = "held";
    granted.reason = "native helper pid 77 not yet reaped";
    RetentionStatus kept;
    kept.ref = {4, D(4)};
    kept.answered_at = t;
    kept.keep = true;
    Write(files.RetentionPath(), FormatRetentionRecord({granted, kept}, t));
    RecordEntry e;
    e.id = "66666666-6666-4666-8666-666666666666";
    e.operation = "kill";
    e.sandbox_id = "77777777-7777-4777-8777-777777777777";
    e.generation = 3;
    e.state = RecordState::kRunning;
    e.accepted_at = t;
    ASSERT_TRUE(WriteFileAtomically(files.OperationsDir() + "/" + e.id + ".json",
                                    EncodeRecordEntry(e), 0600)
                    .ok());
    Write(files.ProgressPath(5),
          FormatProgressRecord(PreparationJob{{5, D(5)}, JobRole::kOther},
                               PreparationProgress{"upload", "image.tar", 10, 40}, std::nullopt,
                               t));

    pbf::ListGenerationsResponse l;
    Add(&l, 1, pbf::GENERATION_STATE_READY)->add_lease_holders(100);
    pbf::GenerationDetail* two = Add(&l, 2, pbf::GENERATION_STATE_READY);
    two->add_helper_pids(200);
    two->set_calls_in_flight(2);
    pbf::GenerationDetail* three = Add(&l, 3, pbf::GENERATION_STATE_READY);
    three->add_lease_holders(300);
    pbf::GenerationDetail* four = Add(&l, 4, pbf::GENERATION_STATE_FAILED);
    four->mutable_report()->set_diagnostic(pbf::OWNERSHIP_REFUSED);
    pbf::GenerationDetail* five = Add(&l, 5, pbf::GENERATION_STATE_PREPARING);
    five->set_has_progress(true);
    five->set_artifacts_stored(1);
    five->set_artifacts_total(2);
    five->set_bytes_stored(30);
    five->set_bytes_total(70);
    pbf::GenerationDetail* six = Add(&l, 6, pbf::GENERATION_STATE_COLLECTING);
    six->set_collect_files_left(3);
    six->set_native_done(true);
    Add(&l, 7, pbf::GENERATION_STATE_DROPPED);
    privhelper_.service.SetList(l);
  }

  std::map<int64_t, nlohmann::json> Rows(const std::string& json_text) {
    nlohmann::json j = nlohmann::json::parse(json_text);
    EXPECT_EQ(j.size(), 1u);
    std::map<int64_t, nlohmann::json> rows;
    const std::set<std::string> allowed = {"generation", "specification_digest", "state",
                                           "roles", "diagnostic", "references", "progress"};
    for (const nlohmann::json& r : j.at("generations")) {
      for (const auto& [k, v] : r.items()) EXPECT_TRUE(allowed.count(k)) << k;
      for (const char* req : {"generation", "specification_digest", "state", "roles",
                              "references"}) {
        EXPECT_TRUE(r.contains(req)) << req;
      }
      rows[r.at("generation").get<int64_t>()] = r;
    }
    return rows;
  }

  testing::FakePrivhelperServer privhelper_;
  std::string state_;
  AgentConfig config_;
};

using Strings = std::vector<std::string>;

TEST_F(GenerationsViewTest, JsonNamesEveryGenerationWithItsStateRolesAndEveryReference) {
  Populate();
  const auto before = Snapshot(state_);
  Output o = Run(/*json=*/true);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.err, "");
  std::map<int64_t, nlohmann::json> rows = Rows(o.out);
  ASSERT_EQ(rows.size(), 7u);

  EXPECT_EQ(rows[1]["state"], "ready");
  EXPECT_EQ(rows[1]["roles"], Strings{"serving"});
  EXPECT_EQ(rows[1]["references"], (Strings{"serving pin", "lease held by pid(s) 100"}));

  EXPECT_EQ(rows[2]["roles"], Strings{"target"});
  EXPECT_EQ(rows[2]["references"], (Strings{"target", "2 calls in flight in privhelper",
                                            "native helper pid 200 (until reaped)"}));

  EXPECT_EQ(rows[3]["state"], "ready");
  EXPECT_EQ(rows[3]["roles"], Strings{});
  EXPECT_EQ(rows[3]["references"],
            (Strings{"1 queued or running mutation in the operation record",
                     "lease held by pid(s) 300",
                     "drop granted at 2026-11-18T11:06:40Z; privhelper still held it: native "
                     "helper pid 77 not yet reaped (a new grant is needed)"}));

  EXPECT_EQ(rows[4]["state"], "failed");
  EXPECT_EQ(rows[4]["diagnostic"], "ownership_refused");
  EXPECT_EQ(rows[4]["references"],
            Strings{"no drop grant yet (Core kept it at 2026-11-18T11:06:40Z)"});

  EXPECT_EQ(rows[5]["state"], "preparing");
  EXPECT_EQ(rows[5]["progress"]["phase"], "upload");
  EXPECT_EQ(rows[5]["progress"]["bytes_done"], 10);
  EXPECT_EQ(rows[5]["progress"]["artifacts_stored"], 1);
  EXPECT_EQ(rows[5]["progress"]["artifacts_total"], 2);
  EXPECT_EQ(rows[5]["progress"]["import_started"], false);
  EXPECT_EQ(rows[5]["references"].size(), 2u);

  EXPECT_EQ(rows[6]["state"], "collecting");
  EXPECT_EQ(rows[6]["references"],
            (Strings{"collection journal: 3 files left, native cleanup done",
                     "no drop grant yet"}));

  EXPECT_EQ(rows[7]["state"], "dropped");
  EXPECT_EQ(rows[7]["references"], Strings{});
  EXPECT_FALSE(rows[7].contains("diagnostic"));
  EXPECT_FALSE(rows[7].contains("progress"));

  // Read-only: nothing under the state directory changed, nothing was added.
  EXPECT_EQ(Snapshot(state_), before);
  EXPECT_EQ(privhelper_.service.calls(), Strings{"ListGenerations"});
}

TEST_F(GenerationsViewTest, TextSaysPrivhelperIsReachableAndWhatHoldsEachGeneration) {
  Populate();
  Output o = Run(/*json=*/false);
  EXPECT_EQ(o.code, 0);
  EXPECT_NE(o.out.find("privhelper: reachable"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("generation 6  666666666666  collecting"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("held by: lease held by pid(s) 300"), std::string::npos);
  EXPECT_NE(o.out.find("generation 7  777777777777  dropped\n    held by: nothing"),
            std::string::npos);
}

TEST_F(GenerationsViewTest, PrivhelperDownSaysSoAndShowsWhatTheAgentAloneKnows) {
  Populate();
  StateFiles files(state_);
  Write(files.SpecificationPath(8), "{}");  // a stored specification privhelper would know
  config_.privhelper_socket = state_ + "/no-such.sock";
  Output text = Run(/*json=*/false);
  EXPECT_EQ(text.code, 1);
  EXPECT_NE(text.out.find("privhelper: UNREACHABLE"), std::string::npos) << text.out;
  Output o = Run(/*json=*/true);
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("privhelper unreachable"), std::string::npos) << o.err;
  std::map<int64_t, nlohmann::json> rows = Rows(o.out);
  // Pins, the progress record and the stored specification; nothing privhelper alone knows.
  EXPECT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1]["roles"], Strings{"serving"});
  EXPECT_EQ(rows[1]["state"], "failed");
  EXPECT_EQ(rows[1]["diagnostic"], "provider_unavailable");
  EXPECT_EQ(rows[2]["roles"], Strings{"target"});
  EXPECT_EQ(rows[5]["state"], "preparing");
  EXPECT_EQ(rows[5]["progress"]["phase"], "upload");
  EXPECT_EQ(rows[8]["specification_digest"],
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
  EXPECT_FALSE(rows.count(3));  // known from the record only: it names no digest
}

TEST_F(GenerationsViewTest, TornFileIsReportedNotGuessedAround) {
  Populate();
  StateFiles files(state_);
  Write(files.RetentionPath(), "{\"schema\":1,\"generations\":[{\"generation\":");
  Output o = Run(/*json=*/true);
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("retention.json"), std::string::npos) << o.err;
  std::map<int64_t, nlohmann::json> rows = Rows(o.out);
  EXPECT_EQ(rows[3]["references"].back(), "no drop grant yet");
}

}  // namespace
}  // namespace sn::agent
