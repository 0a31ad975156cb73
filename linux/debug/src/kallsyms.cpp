#include "hwarb/linux/kallsyms.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <span>

#include "hwarb/base/format.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

bool is_hex(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) != 0;
}

std::uint64_t hex_value(std::string_view digits) {
  std::uint64_t v = 0;
  for (char c : digits) {
    const int d = std::isdigit(static_cast<unsigned char>(c)) != 0
                      ? c - '0'
                      : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    v = v * 16 + static_cast<std::uint64_t>(d);
  }
  return v;
}

// The next field of `line` from `at` (spaces and tabs separate fields).
std::string_view field(std::string_view line, std::size_t& at) {
  while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
  const std::size_t start = at;
  while (at < line.size() && line[at] != ' ' && line[at] != '\t') ++at;
  return line.substr(start, at - start);
}

}  // namespace

Result<std::vector<KernelSymbol>> parse_kallsyms(std::string_view text) {
  std::vector<KernelSymbol> out;
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const auto bad = [&](const std::string& why) {
      return make_error(ErrorCode::kInval, "kallsyms: line " + std::to_string(number) + ": " + why +
                                               " (want 'ADDR TYPE NAME [[MODULE]]')");
    };
    std::size_t at = 0;
    const std::string_view addr = field(line, at);
    const std::string_view type = field(line, at);
    const std::string_view name = field(line, at);
    const std::string_view module = field(line, at);
    if (addr.empty() || addr.size() > 16 || !std::all_of(addr.begin(), addr.end(), is_hex)) {
      return bad("the address '" + std::string(addr) + "' is not 1 to 16 hex digits");
    }
    if (type.size() != 1 || std::isalpha(static_cast<unsigned char>(type[0])) == 0) {
      return bad("the type '" + std::string(type) + "' is not one letter");
    }
    if (name.empty()) return bad("no symbol name");
    KernelSymbol s{
        .address = hex_value(addr), .type = type[0], .name = std::string(name), .module = {}};
    if (!module.empty()) {
      if (module.size() < 3 || module.front() != '[' || module.back() != ']') {
        return bad("the module '" + std::string(module) + "' is not in brackets");
      }
      s.module = std::string(module.substr(1, module.size() - 2));
    }
    if (!field(line, at).empty()) return bad("more than four fields");
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](const KernelSymbol& a, const KernelSymbol& b) {
    return a.address < b.address;
  });
  return out;
}

Result<KernelSymbols> KernelSymbols::load(const std::string& path) {
  auto fd = open_file(path);
  if (!fd) return std::unexpected(fd.error());
  std::string text;
  std::array<std::uint8_t, 1 << 16> buf{};
  for (std::uint64_t offset = 0;;) {
    auto n = pread_file(fd->get(), offset, std::span<std::uint8_t>(buf));
    if (!n) return std::unexpected(n.error());
    if (*n == 0) break;
    text.append(reinterpret_cast<const char*>(buf.data()), *n);
    offset += *n;
  }
  auto symbols = parse_kallsyms(text);
  if (!symbols) return std::unexpected(symbols.error().with_context(path));
  return from(std::move(*symbols));
}

KernelSymbols KernelSymbols::from(std::vector<KernelSymbol> symbols) {
  KernelSymbols table;
  std::stable_sort(
      symbols.begin(), symbols.end(),
      [](const KernelSymbol& a, const KernelSymbol& b) { return a.address < b.address; });
  table.hidden_ =
      !symbols.empty() && std::all_of(symbols.begin(), symbols.end(),
                                      [](const KernelSymbol& s) { return s.address == 0; });
  table.symbols_ = std::move(symbols);
  return table;
}

Result<KernelSymbol> KernelSymbols::find(std::string_view name) const {
  if (hidden_) {
    return make_error(ErrorCode::kAcces,
                      "symbol: the kernel hides its addresses from this user (every address in "
                      "/proc/kallsyms reads 0: kptr_restrict, or not root); '" +
                          std::string(name) + "' has no address to watch");
  }
  const KernelSymbol* best = nullptr;
  for (const KernelSymbol& s : symbols_) {
    if (s.name != name) continue;
    const bool text = s.type == 't' || s.type == 'T';
    if (best == nullptr || (text && best->type != 't' && best->type != 'T')) best = &s;
  }
  if (best == nullptr) {
    return make_error(ErrorCode::kNoEnt,
                      "symbol: no kernel symbol '" + std::string(name) + "' in kallsyms");
  }
  return *best;
}

std::uint64_t KernelSymbols::size_of(const KernelSymbol& symbol) const {
  auto next =
      std::upper_bound(symbols_.begin(), symbols_.end(), symbol.address,
                       [](std::uint64_t addr, const KernelSymbol& s) { return addr < s.address; });
  return next == symbols_.end() ? 0 : next->address - symbol.address;
}

std::string KernelSymbols::describe(std::uint64_t addr) const {
  auto after =
      std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                       [](std::uint64_t a, const KernelSymbol& s) { return a < s.address; });
  if (hidden_ || after == symbols_.begin()) return hex(addr);
  const KernelSymbol& s = *std::prev(after);
  std::string out = s.name;
  if (addr != s.address) out += "+" + hex(addr - s.address);
  if (!s.module.empty()) out += " [" + s.module + "]";
  return out;
}

}  // namespace hwarb::native
