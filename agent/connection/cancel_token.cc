#include "agent/connection/cancel_token.h"

#include <utility>

namespace sn::agent {

void CancelToken::Cancel() {
  absl::MutexLock l(&mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& [id, hook] : hooks_) hook();
}

bool CancelToken::cancelled() const {
  absl::MutexLock l(&mu_);
  return cancelled_;
}

CancelToken::Registration::Registration(CancelToken* token, std::function<void()> hook)
    : token_(token) {
  if (token_ == nullptr) return;
  absl::MutexLock l(&token_->mu_);
  if (token_->cancelled_) {
    hook();
    return;
  }
  id_ = token_->next_id_++;
  token_->hooks_.emplace(id_, std::move(hook));
}

CancelToken::Registration::~Registration() {
  if (token_ == nullptr || id_ == 0) return;
  absl::MutexLock l(&token_->mu_);
  token_->hooks_.erase(id_);
}

}  // namespace sn::agent
