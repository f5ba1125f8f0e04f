#include "privhelper/native/docker/tar.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sn::native::docker {
namespace {

constexpr size_t kBlock = 512;

void PutOctal(char* field, size_t width, uint64_t v) {
  // width-1 octal digits, NUL-terminated.
  std::string s(width - 1, '0');
  for (size_t i = width - 1; i-- > 0 && v > 0; v >>= 3) s[i] = static_cast<char>('0' + (v & 7));
  memcpy(field, s.data(), width - 1);
  field[width - 1] = '\0';
}

std::string Header(std::string_view name, char type, uint32_t mode, uint64_t size) {
  std::string h(kBlock, '\0');
  memcpy(h.data(), name.data(), std::min<size_t>(name.size(), 100));
  PutOctal(&h[100], 8, mode);
  PutOctal(&h[108], 8, 0);
  PutOctal(&h[116], 8, 0);
  PutOctal(&h[124], 12, size);
  PutOctal(&h[136], 12, 0);
  h[156] = type;
  memcpy(&h[257], "ustar", 6);
  memcpy(&h[263], "00", 2);
  memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  char chk[8];
  snprintf(chk, sizeof chk, "%06o", sum);
  memcpy(&h[148], chk, 7);  // six digits, NUL, then the space already there
  return h;
}

void Pad(std::string* out) {
  size_t rem = out->size() % kBlock;
  if (rem != 0) out->append(kBlock - rem, '\0');
}

uint64_t ParseNumber(const char* f, size_t width, bool* ok) {
  const unsigned char* u = reinterpret_cast<const unsigned char*>(f);
  if (u[0] & 0x80) {  // base-256
    uint64_t v = u[0] & 0x7f;
    for (size_t i = 1; i < width; ++i) v = (v << 8) | u[i];
    return v;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < width && (f[i] == ' ' || f[i] == '\0')) ++i;
  for (; i < width && f[i] >= '0' && f[i] <= '7'; ++i) v = (v << 3) | static_cast<uint64_t>(f[i] - '0');
  for (; i < width; ++i) {
    if (f[i] != ' ' && f[i] != '\0') *ok = false;
  }
  return v;
}

}  // namespace

TarFraming TarOneFileFraming(std::string_view name, uint32_t mode, uint64_t size) {
  TarFraming f;
  std::string& out = f.head;
  if (name.size() > 100) {
    std::string rec_tail = absl::StrCat(" path=", absl::string_view(name.data(), name.size()), "\n");
    // The record's length counts its own decimal digits: iterate to the fixed point.
    size_t total = rec_tail.size() + 1;
    while (rec_tail.size() + std::to_string(total).size() != total) {
      total = rec_tail.size() + std::to_string(total).size();
    }
    std::string record = absl::StrCat(total, rec_tail);
    out += Header("PaxHeader", 'x', 0644, record.size());
    out += record;
    Pad(&out);
  }
  out += Header(name, '0', mode & 07777, size);
  f.tail.append(static_cast<size_t>((kBlock - size % kBlock) % kBlock), '\0');
  f.tail.append(2 * kBlock, '\0');
  return f;
}

std::string TarOneFile(std::string_view name, uint32_t mode, std::string_view content) {
  TarFraming f = TarOneFileFraming(name, mode, content.size());
  std::string out = std::move(f.head);
  out.append(content.data(), content.size());
  out += f.tail;
  return out;
}

bool TarFirstEntryReader::complete() const {
  return header_seen_ && content_.size() == std::min<uint64_t>(size_, max_bytes_);
}

bool TarFirstEntryReader::ParseHeader() {
  bool ok = true;
  const char* h = header_.data();
  if (std::all_of(header_.begin(), header_.end(), [](char c) { return c == '\0'; })) {
    error_ = absl::DataLossError("tar: archive without entries");
    return false;
  }
  uint64_t size = ParseNumber(h + 124, 12, &ok);
  char type = h[156];
  if (!ok || memcmp(h + 257, "ustar", 5) != 0) {
    error_ = absl::DataLossError("tar: malformed header");
    return false;
  }
  if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
    skip_ = (size + kBlock - 1) / kBlock * kBlock;
    return true;
  }
  header_seen_ = true;
  type_ = type == '\0' ? '0' : type;
  size_ = (type_ == '0') ? size : 0;
  // The kept bytes are known now: one allocation of exactly that size, never a regrowth that
  // would briefly hold them twice.
  content_.reserve(static_cast<size_t>(std::min<uint64_t>(size_, max_bytes_)));
  link_.assign(h + 157, strnlen(h + 157, 100));
  return true;
}

bool TarFirstEntryReader::Feed(std::string_view data) {
  while (!data.empty()) {
    if (!error_.ok()) return false;
    if (header_seen_) {
      if (type_ != '0') return false;
      uint64_t want = std::min<uint64_t>(size_, max_bytes_) - content_.size();
      size_t take = static_cast<size_t>(std::min<uint64_t>(want, data.size()));
      content_.append(data.data(), take);
      return !complete();
    }
    if (skip_ > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(skip_, data.size()));
      skip_ -= n;
      data.remove_prefix(n);
      continue;
    }
    size_t n = std::min(kBlock - header_.size(), data.size());
    header_.append(data.data(), n);
    data.remove_prefix(n);
    if (header_.size() == kBlock) {
      if (!ParseHeader()) return false;
      header_.clear();
      if (header_seen_ && (type_ != '0' || complete())) return false;
    }
  }
  return error_.ok() && !complete();
}

}  // namespace sn::native::docker
