#pragma once
// A plain-text form for a whole state (barrier_set::dump, replica::dump):
// lines of space-separated words. Strings are escaped so that no word holds
// a space or a newline ('%' and the byte in hex), with a leading '=' so that
// the empty string is a word too. Pure; used by the store's snapshots
// (docs/store.md, "Catch-up"), which a host may read from anyone's etcd, so
// the reader checks everything and never trusts a count it was given.
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tfb::text_state {

/// Appends words to a line; end() finishes the line.
class writer {
 public:
  explicit writer(std::string& out) : out_(out) {}
  writer& word(std::string_view w) {
    if (!first_) out_ += ' ';
    first_ = false;
    out_ += w;
    return *this;
  }
  template <typename T>
  writer& num(T v) {
    char buf[24];
    auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
    (void)ec;
    return word(std::string_view(buf, static_cast<std::size_t>(p - buf)));
  }
  writer& flag(bool b) { return word(b ? "1" : "0"); }
  writer& opt(const std::optional<std::uint32_t>& v) { return v ? num(*v) : word("-"); }
  writer& str(std::string_view s) {
    std::string w = "=";
    static constexpr char hex[] = "0123456789abcdef";
    for (char ch : s) {
      auto u = static_cast<unsigned char>(ch);
      if (u <= 0x20 || ch == '%' || u == 0x7f) {
        w += '%';
        w += hex[u >> 4];
        w += hex[u & 15];
      } else {
        w += ch;
      }
    }
    return word(w);
  }
  void end() {
    out_ += '\n';
    first_ = true;
  }

 private:
  std::string& out_;
  bool first_ = true;
};

/// Reads the words of one line; every read says whether it worked.
class reader {
 public:
  explicit reader(std::string_view line) : rest_(line) {}
  bool word(std::string_view& w) {
    if (done_) return false;
    auto sp = rest_.find(' ');
    w = rest_.substr(0, sp);
    if (sp == std::string_view::npos) {
      done_ = true;
      rest_ = {};
    } else {
      rest_.remove_prefix(sp + 1);
    }
    return true;
  }
  template <typename T>
  bool num(T& v) {
    std::string_view w;
    if (!word(w)) return false;
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    return ec == std::errc{} && p == w.data() + w.size();
  }
  bool flag(bool& b) {
    std::string_view w;
    if (!word(w) || (w != "0" && w != "1")) return false;
    b = w == "1";
    return true;
  }
  bool opt(std::optional<std::uint32_t>& v) {
    std::string_view w;
    if (!word(w)) return false;
    if (w == "-") {
      v.reset();
      return true;
    }
    std::uint32_t x = 0;
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), x);
    if (ec != std::errc{} || p != w.data() + w.size()) return false;
    v = x;
    return true;
  }
  bool str(std::string& s) {
    std::string_view w;
    if (!word(w) || w.empty() || w[0] != '=') return false;
    s.clear();
    for (std::size_t i = 1; i < w.size(); ++i) {
      if (w[i] != '%') {
        s += w[i];
        continue;
      }
      if (i + 2 >= w.size()) return false;
      unsigned v = 0;
      auto [p, ec] = std::from_chars(w.data() + i + 1, w.data() + i + 3, v, 16);
      if (ec != std::errc{} || p != w.data() + i + 3) return false;
      s += static_cast<char>(v);
      i += 2;
    }
    return true;
  }
  /// True when every word was read.
  bool at_end() const { return done_; }

 private:
  std::string_view rest_;
  bool done_ = false;
};

/// Splits text into lines (the last must end with '\n'); calls f(line) for
/// each until it returns false. False when a line is cut or f failed.
template <typename F>
bool each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos) return false;
    if (!f(text.substr(0, nl))) return false;
    text.remove_prefix(nl + 1);
  }
  return true;
}

}  // namespace tfb::text_state
