#include "server/collective/cluster/call_agreement.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

// Layout (little-endian): magic u32, call u64, code u32, digest length u8,
// digest [16], message length u16, message [rest].
constexpr uint32_t kMagic = 0x31574350;  // "PCW1"
constexpr size_t kDigestBytes = 16;
constexpr size_t kHeaderBytes = 4 + 8 + 4 + 1 + kDigestBytes + 2;
constexpr size_t kMessageBytes = kCallWordBytes - kHeaderBytes;

template <typename T>
void Put(std::string& out, size_t at, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out[at + i] = static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff);
  }
}

template <typename T>
T Get(absl::string_view in, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  }
  return static_cast<T>(v);
}

std::string Described(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

}  // namespace

absl::Status PartFailedError(int32_t process, const absl::Status& status) {
  return absl::AbortedError(
      absl::StrCat("process ", process, " failed its part: ", Described(status)));
}

std::string EncodeForfeit(int32_t process, const CallWord& word) {
  std::string out(4, '\0');
  Put<uint32_t>(out, 0, static_cast<uint32_t>(process));
  return out + EncodeCallWord(word);
}

absl::StatusOr<std::pair<int32_t, CallWord>> DecodeForfeit(absl::string_view notice) {
  if (notice.size() != 4 + kCallWordBytes) {
    return absl::InternalError(absl::StrCat("a malformed forfeit notice of ", notice.size(),
                                            " bytes (expected ", 4 + kCallWordBytes, ")"));
  }
  absl::StatusOr<CallWord> word = DecodeCallWord(notice.substr(4));
  if (!word.ok()) return word.status();
  return std::make_pair(static_cast<int32_t>(Get<uint32_t>(notice, 0)), *std::move(word));
}

bool IsConsequenceCode(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded ||
         code == absl::StatusCode::kCancelled || code == absl::StatusCode::kAborted;
}

std::string EncodeCallWord(const CallWord& word) {
  std::string out(kCallWordBytes, '\0');
  Put<uint32_t>(out, 0, kMagic);
  Put<uint64_t>(out, 4, word.call);
  Put<uint32_t>(out, 12, static_cast<uint32_t>(word.status.code()));
  const size_t digest = std::min(word.digest.size(), kDigestBytes);
  Put<uint8_t>(out, 16, static_cast<uint8_t>(digest));
  std::memcpy(out.data() + 17, word.digest.data(), digest);
  std::string message(word.status.message());
  if (message.size() > kMessageBytes)
    message = absl::StrCat(message.substr(0, kMessageBytes - 3), "...");
  Put<uint16_t>(out, 17 + kDigestBytes, static_cast<uint16_t>(message.size()));
  std::memcpy(out.data() + kHeaderBytes, message.data(), message.size());
  return out;
}

absl::StatusOr<CallWord> DecodeCallWord(absl::string_view block) {
  if (block.size() != kCallWordBytes) {
    return absl::InternalError(absl::StrCat("a malformed agreement word of ", block.size(),
                                            " bytes (expected ", kCallWordBytes, ")"));
  }
  if (const uint32_t magic = Get<uint32_t>(block, 0); magic != kMagic) {
    return absl::InternalError(absl::StrCat("a malformed agreement word: it starts with 0x",
                                            absl::Hex(magic), ", not 0x", absl::Hex(kMagic)));
  }
  CallWord word;
  word.call = Get<uint64_t>(block, 4);
  const uint32_t code = Get<uint32_t>(block, 12);
  const size_t digest = Get<uint8_t>(block, 16);
  const size_t message = Get<uint16_t>(block, 17 + kDigestBytes);
  if (digest > kDigestBytes || message > kMessageBytes || code > 16) {
    return absl::InternalError(absl::StrCat("a malformed agreement word (code ", code, ", digest ",
                                            digest, " bytes, message ", message, " bytes)"));
  }
  word.digest = std::string(block.substr(17, digest));
  word.status =
      absl::Status(static_cast<absl::StatusCode>(code), block.substr(kHeaderBytes, message));
  return word;
}

absl::Status JudgeRound(const std::vector<int32_t>& processes, size_t self,
                        const std::vector<CallWord>& words, absl::string_view set) {
  const absl::Status& mine = words[self].status;
  if (!mine.ok() && !IsConsequenceCode(mine.code())) return mine;
  std::optional<size_t> blamed;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i == self || words[i].status.ok()) continue;
    if (!blamed.has_value()) blamed = i;
    if (!IsConsequenceCode(words[i].status.code())) {
      blamed = i;
      break;
    }
  }
  const bool other_cause = blamed.has_value() && !IsConsequenceCode(words[*blamed].status.code());
  if (!mine.ok() && !other_cause) return mine;
  if (blamed.has_value()) {
    return PartFailedError(processes[*blamed], words[*blamed].status);
  }
  for (size_t i = 0; i < words.size(); ++i) {
    if (i == self) continue;
    if (words[i].call != words[self].call || words[i].digest != words[self].digest) {
      const std::string which =
          words[i].call == words[self].call
              ? absl::StrCat("as call ", words[self].call)
              : absl::StrCat("(this process's call ", words[self].call, ", process ", processes[i],
                             "'s call ", words[i].call, ")");
      return absl::InvalidArgumentError(absl::StrCat(
          "process ", processes[self], " and process ", processes[i],
          " asked for different collectives ", which, " of ", set,
          "; every process's trainer must issue a set's multi-controller collectives in the "
          "same order, with the same arguments"));
    }
  }
  return absl::OkStatus();
}

}  // namespace placement::server
