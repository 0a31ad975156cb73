#include "hwarb/breakpoints/kallsyms.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>

#include "hwarb/base/format.h"

namespace hwarb::breakpoints {

namespace {

bool blank(char c) {
  return c == ' ' || c == '\t';
}

// A whole string as a number in `base` (16: no 0x).
bool parse_u64(std::string_view s, int base, std::uint64_t* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// The words of a line split at spaces and tabs.
std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && blank(line[i])) ++i;
    const std::size_t start = i;
    while (i < line.size() && !blank(line[i])) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

// One kallsyms line (not blank): "ADDR TYPE NAME [[module]]".
Result<KernelSymbol> parse_line(std::string_view line) {
  const std::vector<std::string_view> w = words_of(line);
  if (w.size() < 3 || w.size() > 4) {
    return make_error(ErrorCode::kInval, "expected 'ADDR TYPE NAME [[module]]', got " +
                                             std::to_string(w.size()) + " words");
  }
  KernelSymbol s;
  if (!parse_u64(w[0], 16, &s.addr)) {
    return make_error(ErrorCode::kInval,
                      "addr: bad '" + std::string(w[0]) + "' (expected hex without 0x)");
  }
  if (w[1].size() != 1 || !std::isalpha(static_cast<unsigned char>(w[1][0]))) {
    return make_error(ErrorCode::kInval,
                      "type: bad '" + std::string(w[1]) + "' (expected one letter)");
  }
  s.type = w[1][0];
  s.name = std::string(w[2]);
  if (w.size() == 4) {
    const std::string_view m = w[3];
    if (m.size() < 3 || m.front() != '[' || m.back() != ']') {
      return make_error(ErrorCode::kInval,
                        "module: bad '" + std::string(m) + "' (expected [name])");
    }
    s.module = std::string(m.substr(1, m.size() - 2));
  }
  return s;
}

}  // namespace

Result<std::vector<KernelSymbol>> parse_kallsyms(std::string_view text, std::vector<int>* lines) {
  std::vector<KernelSymbol> out;
  std::size_t at = 0;
  int line = 0;
  while (at < text.size()) {
    ++line;
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(at, end - at);
    at = end + 1;
    if (l.ends_with('\r')) l.remove_suffix(1);
    if (words_of(l).empty()) continue;
    auto s = parse_line(l);
    if (!s) return std::unexpected(s.error().with_context("line " + std::to_string(line)));
    if (s->addr == 0) {
      return make_error(ErrorCode::kInval,
                        "line " + std::to_string(line) + ": addr: 0 for " + s->name +
                            " (kptr_restrict hides the addresses: read /proc/kallsyms with "
                            "CAP_SYSLOG, e.g. as root)");
    }
    out.push_back(std::move(*s));
    if (lines != nullptr) lines->push_back(line);
  }
  return out;
}

Result<void> KernelSymbols::check(const KernelSymbol& s) const {
  if (s.name.empty()) return make_error(ErrorCode::kInval, "name: empty");
  for (char c : s.name) {
    if (blank(c) || c == '+' || c == '=' || static_cast<unsigned char>(c) < 0x20) {
      return make_error(ErrorCode::kInval,
                        "name: '" + s.name + "' has a blank, '+', '=' or control character");
    }
  }
  if (s.addr < kernel_start_) {
    return make_error(ErrorCode::kInval, "addr: " + hex(s.addr) + " of " + s.name +
                                             " is a user-space address (kernel symbols are at "
                                             "or above TASK_SIZE_MAX " +
                                             hex(kernel_start_) + ")");
  }
  if (s.size != 0 && s.addr + (s.size - 1) < s.addr) {
    return make_error(ErrorCode::kInval, "size: " + std::to_string(s.size) + " at " + hex(s.addr) +
                                             " wraps past 2^64");
  }
  return {};
}

Result<void> KernelSymbols::add(KernelSymbol symbol) {
  if (auto r = check(symbol); !r) return r;
  auto [lo, hi] = by_addr_.equal_range(symbol.addr);
  for (auto it = lo; it != hi; ++it) {
    if (symbols_[it->second].name == symbol.name) return {};
  }
  const std::size_t index = symbols_.size();
  by_name_.emplace(symbol.name, index);  // keeps the first index of a name
  by_addr_.emplace(symbol.addr, index);
  symbols_.push_back(std::move(symbol));
  return {};
}

Result<void> KernelSymbols::add_all(const std::vector<KernelSymbol>& symbols) {
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    if (auto r = check(symbols[i]); !r) {
      return std::unexpected(r.error().with_context("symbol " + std::to_string(i + 1)));
    }
  }
  for (const KernelSymbol& s : symbols) {
    if (auto r = add(s); !r) return r;  // checked above: cannot fail
  }
  return {};
}

Result<std::size_t> KernelSymbols::load_kallsyms_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  auto failed = [&](int err) {
    return make_error(from_errno(err), "cannot read " + path + ": " + std::strerror(err));
  };
  if (!f) return failed(errno);
  std::string text;
  char buf[65536];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, f.get());
    text.append(buf, n);
    if (text.size() > kMaxKallsymsBytes) {
      return make_error(ErrorCode::kInval, path + ": larger than the limit of " +
                                               std::to_string(kMaxKallsymsBytes) + " bytes");
    }
    if (n < sizeof buf) {
      if (std::ferror(f.get())) return failed(errno);
      break;
    }
  }
  std::vector<int> lines;
  auto symbols = parse_kallsyms(text, &lines);
  if (!symbols) return std::unexpected(symbols.error().with_context(path));
  for (std::size_t i = 0; i < symbols->size(); ++i) {
    if (auto r = check((*symbols)[i]); !r) {
      return std::unexpected(r.error().with_context(path + ": line " + std::to_string(lines[i])));
    }
  }
  const std::size_t before = size();
  if (auto r = add_all(*symbols); !r) return std::unexpected(r.error().with_context(path));
  return size() - before;
}

Result<KernelSymbol> KernelSymbols::lookup(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    return make_error(ErrorCode::kNoEnt, "symbol: no kernel symbol '" + std::string(name) + "'");
  }
  return symbols_[it->second];
}

Result<std::uint64_t> KernelSymbols::resolve(std::string_view spec) const {
  const std::size_t plus = spec.find('+');
  const std::string_view name = spec.substr(0, plus);
  std::uint64_t off = 0;
  if (plus != std::string_view::npos) {
    std::string_view o = spec.substr(plus + 1);
    int base = 10;
    if (o.starts_with("0x") || o.starts_with("0X")) {
      o.remove_prefix(2);
      base = 16;
    }
    if (!parse_u64(o, base, &off)) {
      return make_error(ErrorCode::kInval, "symbol: bad offset in '" + std::string(spec) +
                                               "' (expected SYMBOL[+OFF], OFF decimal or 0x hex)");
    }
  }
  if (name.empty()) {
    return make_error(ErrorCode::kInval,
                      "symbol: empty name in '" + std::string(spec) + "' (expected SYMBOL[+OFF])");
  }
  auto s = lookup(name);
  if (!s) return std::unexpected(s.error());
  if (s->addr + off < s->addr) {
    return make_error(ErrorCode::kInval, "symbol: " + std::string(spec) + " wraps past 2^64");
  }
  return s->addr + off;
}

std::optional<std::string> KernelSymbols::symbolize(std::uint64_t addr) const {
  auto it = by_addr_.upper_bound(addr);
  if (it == by_addr_.begin()) return std::nullopt;
  --it;
  // The first symbol added at that address.
  const std::uint64_t start = it->first;
  auto first = by_addr_.lower_bound(start);
  const KernelSymbol& s = symbols_[first->second];
  if (s.size != 0 && addr - s.addr >= s.size) return std::nullopt;
  return s.name + "+" + hex(addr - s.addr);
}

}  // namespace hwarb::breakpoints
