// RegexSplitter over PCRE2 (8-bit code units, UTF + UCP so \s, \p{L}, \w and case folding follow
// Unicode as Oniguruma does in Hugging Face tokenizers). The pattern is JIT-compiled when PCRE2
// has a JIT for this CPU: pre-tokenisation is the encoder's hottest loop after the merges.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_split.h"

#include <pcre2.h>

#include <cctype>
#include <string>

#include "tokenizer/utf8.h"

namespace roofline {

namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// Appends text[begin, end) if non-empty.
void emit(std::string_view text, size_t begin, size_t end, std::vector<std::string_view>* out) {
  if (end > begin) out->push_back(text.substr(begin, end - begin));
}

}  // namespace

StatusOr<std::unique_ptr<RegexSplitter>> RegexSplitter::create(const RegexSplit& split) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP;
  if (split.literal) options |= PCRE2_LITERAL;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(split.pattern.data()), split.pattern.size(),
                    options, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return invalid_argument(
        "pre-tokenizer regex '" + split.pattern + "' is rejected by PCRE2 at offset " +
        std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message) +
        " (the tokenizer file's Split pattern must be a PCRE2-compatible regex)");
  }
  // JIT is an optimisation: without it (unsupported CPU, SELinux) matching still works.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::unique_ptr<RegexSplitter> splitter(new RegexSplitter());
  splitter->code_ = code;
  splitter->behavior_ = split.behavior;
  return splitter;
}

RegexSplitter::~RegexSplitter() {
  if (code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

void RegexSplitter::split(const std::vector<std::string_view>& in,
                          std::vector<std::string_view>* out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  // One match block per call, not per piece: the second split of a Sequence sees thousands of
  // small pieces.
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(code, nullptr));
  for (std::string_view text : in) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0;
    size_t piece_begin = 0;  // start of text not yet emitted
    while (pos < text.size()) {
      // The text was repaired to valid UTF-8 before splitting, so PCRE2's check is redundant.
      const int rc =
          pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
      if (rc < 0) break;  // no more matches (or a match limit: the rest is one gap)
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
      const size_t m_begin = ovector[0], m_end = ovector[1];
      if (m_end <= m_begin) {
        // Empty match: Hugging Face ignores those; step over one character and search again.
        pos = m_begin + 1;
        while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
        continue;
      }
      switch (behavior_) {
        case SplitBehavior::kIsolated:
          emit(text, piece_begin, m_begin, out);
          emit(text, m_begin, m_end, out);
          piece_begin = m_end;
          break;
        case SplitBehavior::kRemoved:
          emit(text, piece_begin, m_begin, out);
          piece_begin = m_end;
          break;
        case SplitBehavior::kMergedWithPrevious:
          emit(text, piece_begin, m_end, out);
          piece_begin = m_end;
          break;
        case SplitBehavior::kMergedWithNext:
          emit(text, piece_begin, m_begin, out);
          piece_begin = m_begin;
          break;
        case SplitBehavior::kContiguous: {
          emit(text, piece_begin, m_begin, out);
          // Extend the run while the next match starts exactly where this one ended.
          size_t run_end = m_end;
          while (run_end < text.size()) {
            const int rc_next = pcre2_match(code, subject, text.size(), run_end, PCRE2_NO_UTF_CHECK,
                                            match.get(), nullptr);
            if (rc_next < 0) break;
            const PCRE2_SIZE* next = pcre2_get_ovector_pointer(match.get());
            if (next[0] != run_end || next[1] <= next[0]) break;
            run_end = next[1];
          }
          emit(text, m_begin, run_end, out);
          piece_begin = run_end;
          pos = run_end;
          continue;
        }
      }
      pos = m_end;
    }
    emit(text, piece_begin, text.size(), out);
  }
}

bool is_word_char(uint32_t code_point) {
  if (code_point < 0x80) return std::isalnum(static_cast<int>(code_point)) || code_point == '_';
  // Compiled once; a static local is initialised thread-safely. Never freed: it lives as long as
  // the process, like the tables of any Unicode library.
  static pcre2_code* const code = [] {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    const char* pattern = "^[\\p{L}\\p{N}_]";
    return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  }();
  if (code == nullptr) return false;
  std::string subject;
  utf8::append(code_point, &subject);
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(code, nullptr));
  return pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0, 0,
                     match.get(), nullptr) >= 0;
}

}  // namespace roofline
