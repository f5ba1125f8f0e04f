#include "privhelper/store/overlapped_load.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace sn::privhelper::store {

OverlappedLoad::OverlappedLoad(int64_t generation, std::string artifact, uint64_t size)
    : generation_(generation), artifact_(std::move(artifact)), size_(size) {}

absl::Status OverlappedLoad::Attach(ReleaseStore::Writer& writer) {
  absl::StatusOr<std::unique_ptr<ReadableFile>> reader = writer.Observe(this);
  if (!reader.ok()) return reader.status();
  reader_ = *std::move(reader);
  file_ = reader_->info();
  return absl::OkStatus();
}

OverlappedLoad::~OverlappedLoad() {
  Cancel();
  if (thread_.joinable()) thread_.join();
}

void OverlappedLoad::Start(ImageImporter& importer) {
  deadline_ = absl::Now() + importer.LoadTimeout();
  thread_ = std::thread([this, &importer] { Run(&importer); });
}

void OverlappedLoad::Run(ImageImporter* importer) {
  absl::Status s = importer->Load([this](char* buf, size_t n) { return Read(buf, n); }, size_);
  reader_.reset();
  absl::MutexLock lock(&mu_);
  if (s.ok() && !verified_) {
    // Unreachable by construction (the tail waits for the verification); never reported as
    // loaded.
    s = absl::InternalError("the load ended before the archive was verified");
  }
  result_ = s;
  done_ = true;
  const uint64_t sent = sent_;
  if (s.ok()) {
    LogInfo("overlapped image load completed",
            {{"generation", generation_}, {"artifact", artifact_}, {"bytes", size_}});
  } else {
    LogWarning("overlapped image load failed; Finish loads from the store",
               {{"generation", generation_}, {"artifact", artifact_},
                {"bytes_sent", sent}, {"error", s.ToString()}});
  }
}

absl::StatusOr<size_t> OverlappedLoad::Read(char* buf, size_t n) {
  uint64_t limit = 0;
  uint64_t sent = 0;
  {
    absl::MutexLock lock(&mu_);
    written_ = sent_;  // the engine asks again only once it wrote the previous piece
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return aborted_ || cancelled_ || verified_ ||
             (appended_ > kWithheldBytes && appended_ - kWithheldBytes > sent_);
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline_)) {
      return absl::DeadlineExceededError("the archive's upload did not finish within the load "
                                         "timeout");
    }
    if (aborted_) {
      return absl::AbortedError("the archive's upload ended without a verified, published file");
    }
    if (cancelled_) return absl::CancelledError("privhelper is stopping");
    limit = verified_ ? size_ : appended_ - kWithheldBytes;
    sent = sent_;
  }
  const size_t want = static_cast<size_t>(std::min<uint64_t>(n, limit - sent));
  absl::StatusOr<size_t> got = reader_->Read(buf, want);
  if (!got.ok()) return got.status();
  if (*got == 0) return absl::DataLossError("the store's temporary is shorter than written");
  absl::MutexLock lock(&mu_);
  sent_ += *got;
  return got;
}

void OverlappedLoad::Appended(uint64_t total) {
  absl::MutexLock lock(&mu_);
  appended_ = std::min(total, size_);
}

void OverlappedLoad::Verified() {
  absl::MutexLock lock(&mu_);
  if (!aborted_) verified_ = true;
}

void OverlappedLoad::Committed() {
  absl::MutexLock lock(&mu_);
  if (!aborted_ && verified_) committed_ = true;
}

void OverlappedLoad::Aborted() {
  absl::MutexLock lock(&mu_);
  // After the verification the body may all be sent: the load is not cut, it just never
  // counts (Wait). Before it, the next Read cuts the load mid-body.
  if (!committed_) aborted_ = true;
}

void OverlappedLoad::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

uint64_t OverlappedLoad::AwaitWritten(uint64_t bytes, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return done_ || written_ >= bytes;
  };
  mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  return written_;
}

bool OverlappedLoad::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

bool OverlappedLoad::AwaitDone(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
}

absl::Status OverlappedLoad::Wait() {
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  if (!done_) return absl::FailedPreconditionError("the overlapped load never started");
  if (result_.ok() && !committed_) {
    return absl::FailedPreconditionError(
        "the archive was loaded, but its verified file was not made durable and published");
  }
  return result_;
}

}  // namespace sn::privhelper::store
