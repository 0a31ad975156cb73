#include "dwarf_objects.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "hwarb/base/format.h"

// A path is walked on a cursor: an address and a type DIE, with the dimensions of an array type
// not indexed yet (DWARF gives a multi-dimensional array one DW_TAG_array_type with a subrange
// per dimension). Types are seen through typedefs and cv-qualifiers; sizes come from
// dwarf_aggregate_size, which knows base types, pointers, structs, unions and enums.

namespace hwarb::native::dwarf {
namespace {

constexpr std::uint64_t kUnknownCount = ~std::uint64_t{0};

// Calls `visit` on every DIE below `die` (depth first), `scope` the innermost enclosing
// subprogram (nullptr at namespace level). `visit` returns true to stop the walk.
bool walk(Dwarf_Die* die, Dwarf_Die* scope,
          const std::function<bool(Dwarf_Die&, Dwarf_Die*)>& visit) {
  Dwarf_Die child;
  if (dwarf_child(die, &child) != 0) return false;
  do {
    if (visit(child, scope)) return true;
    const int tag = dwarf_tag(&child);
    Dwarf_Die* inner = tag == DW_TAG_subprogram ? &child : scope;
    if (dwarf_haschildren(&child) && walk(&child, inner, visit)) return true;
  } while (dwarf_siblingof(&child, &child) == 0);
  return false;
}

// Walks every compilation unit of the module.
void walk_units(Dwfl_Module* mod, const std::function<bool(Dwarf_Die&, Dwarf_Die*)>& visit) {
  Dwarf_Addr bias = 0;
  Dwarf* dw = dwfl_module_getdwarf(mod, &bias);
  if (dw == nullptr) return;
  Dwarf_Off off = 0, next = 0;
  std::size_t header = 0;
  while (dwarf_nextcu(dw, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die cu;
    if (dwarf_offdie(dw, off + header, &cu) != nullptr && walk(&cu, nullptr, visit)) return;
    off = next;
  }
}

std::optional<std::uint64_t> udata(Dwarf_Die* die, unsigned name) {
  Dwarf_Attribute attr;
  Dwarf_Word v = 0;
  if (dwarf_attr_integrate(die, name, &attr) == nullptr || dwarf_formudata(&attr, &v) != 0) {
    return std::nullopt;
  }
  return v;
}

// The DIE that attribute `name` of `die` refers to.
bool ref(Dwarf_Die* die, unsigned name, Dwarf_Die* out) {
  Dwarf_Attribute attr;
  return dwarf_attr_integrate(die, name, &attr) != nullptr &&
         dwarf_formref_die(&attr, out) != nullptr;
}

std::string name_of(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  if (dwarf_attr_integrate(die, DW_AT_name, &attr) == nullptr) return {};
  const char* s = dwarf_formstring(&attr);
  return s == nullptr ? std::string() : std::string(s);
}

// `type` seen through typedefs and cv-qualifiers; false for void (no type).
bool strip(Dwarf_Die type, Dwarf_Die* out) {
  for (int i = 0; i < 64; ++i) {
    switch (dwarf_tag(&type)) {
      case DW_TAG_typedef:
      case DW_TAG_const_type:
      case DW_TAG_volatile_type:
      case DW_TAG_restrict_type:
      case DW_TAG_atomic_type:
        if (!ref(&type, DW_AT_type, &type)) return false;
        continue;
      default:
        *out = type;
        return true;
    }
  }
  return false;
}

// The element counts of an array type's dimensions (kUnknownCount when unbounded).
std::vector<std::uint64_t> dimensions(Dwarf_Die* array) {
  std::vector<std::uint64_t> dims;
  Dwarf_Die sub;
  if (dwarf_child(array, &sub) != 0) return dims;
  do {
    if (dwarf_tag(&sub) != DW_TAG_subrange_type) continue;
    if (auto count = udata(&sub, DW_AT_count)) {
      dims.push_back(*count);
    } else if (auto upper = udata(&sub, DW_AT_upper_bound)) {
      dims.push_back(*upper + 1 - udata(&sub, DW_AT_lower_bound).value_or(0));
    } else {
      dims.push_back(kUnknownCount);
    }
  } while (dwarf_siblingof(&sub, &sub) == 0);
  return dims;
}

std::string type_name(Dwarf_Die type, int depth = 0) {
  if (depth > 16) return "?";
  const auto inner = [&](const char* none) {
    Dwarf_Die t;
    return ref(&type, DW_AT_type, &t) ? type_name(t, depth + 1) : std::string(none);
  };
  switch (dwarf_tag(&type)) {
    case DW_TAG_pointer_type:
      return inner("void") + "*";
    case DW_TAG_reference_type:
      return inner("void") + "&";
    case DW_TAG_const_type:
      return "const " + inner("void");
    case DW_TAG_volatile_type:
      return "volatile " + inner("void");
    case DW_TAG_array_type: {
      std::string out = inner("?");
      for (std::uint64_t d : dimensions(&type)) {
        out += d == kUnknownCount ? "[]" : "[" + std::to_string(d) + "]";
      }
      return out;
    }
    default: {
      std::string n = name_of(&type);
      if (!n.empty()) return n;
      switch (dwarf_tag(&type)) {
        case DW_TAG_structure_type:
          return "struct <anonymous>";
        case DW_TAG_union_type:
          return "union <anonymous>";
        case DW_TAG_class_type:
          return "class <anonymous>";
        case DW_TAG_enumeration_type:
          return "enum <anonymous>";
        default:
          return "?";
      }
    }
  }
}

struct Cursor {
  std::uint64_t addr = 0;
  Dwarf_Die type{};                 // as declared (typedefs kept, for its name)
  std::vector<std::uint64_t> dims;  // of an array type, the ones not indexed yet
  std::string spelled;              // the path so far, as given
};

// The element type of an array cursor.
bool element_of(Cursor& c, Dwarf_Die* out) {
  Dwarf_Die stripped;
  return strip(c.type, &stripped) && ref(&stripped, DW_AT_type, out);
}

std::string cursor_type_name(Cursor& c) {
  if (c.dims.empty()) return type_name(c.type);
  Dwarf_Die elem;
  std::string out = element_of(c, &elem) ? type_name(elem) : "?";
  for (std::uint64_t d : c.dims) out += d == kUnknownCount ? "[]" : "[" + std::to_string(d) + "]";
  return out;
}

std::uint64_t size_of(Cursor& c) {
  Dwarf_Die t;
  Dwarf_Word size = 0;
  if (c.dims.empty()) {
    if (!strip(c.type, &t) || dwarf_aggregate_size(&t, &size) != 0) return 0;
    return size;
  }
  Dwarf_Die elem;
  if (!element_of(c, &elem) || !strip(elem, &t) || dwarf_aggregate_size(&t, &size) != 0) return 0;
  for (std::uint64_t d : c.dims) {
    if (d == kUnknownCount) return 0;
    size *= d;
  }
  return size;
}

// A cursor on an object of type `type` at addr (arrays opened into their dimensions).
Cursor land(std::uint64_t addr, Dwarf_Die type, std::string spelled) {
  Cursor c;
  c.addr = addr;
  c.type = type;
  c.spelled = std::move(spelled);
  Dwarf_Die stripped;
  if (strip(type, &stripped) && dwarf_tag(&stripped) == DW_TAG_array_type) {
    c.dims = dimensions(&stripped);
  }
  return c;
}

bool is_static_member(Dwarf_Die* die) {
  if (dwarf_tag(die) == DW_TAG_variable) return true;
  Dwarf_Attribute attr;
  bool flag = false;
  return dwarf_tag(die) == DW_TAG_member && dwarf_attr(die, DW_AT_declaration, &attr) != nullptr &&
         dwarf_formflag(&attr, &flag) == 0 && flag &&
         !dwarf_hasattr(die, DW_AT_data_member_location);
}

struct Member {
  std::uint64_t offset = 0;
  Dwarf_Die type{};
  bool is_static = false;
  Dwarf_Die decl{};  // the member's own DIE
};

// Member `name` of struct/class/union `agg`, through anonymous members and base classes; every
// name seen goes to `names` (for suggestions).
std::optional<Member> find_member(Dwarf_Die* agg, std::string_view name,
                                  std::vector<std::string>& names, int depth = 0) {
  if (depth > 16) return std::nullopt;
  Dwarf_Die child;
  if (dwarf_child(agg, &child) != 0) return std::nullopt;
  do {
    const int tag = dwarf_tag(&child);
    if (tag != DW_TAG_member && tag != DW_TAG_inheritance && tag != DW_TAG_variable) continue;
    const std::string n = name_of(&child);
    const std::uint64_t off = udata(&child, DW_AT_data_member_location)
                                  .value_or(udata(&child, DW_AT_data_bit_offset).value_or(0) / 8);
    Dwarf_Die type;
    const bool typed = ref(&child, DW_AT_type, &type);
    if (!n.empty() && tag != DW_TAG_inheritance) {
      names.push_back(n);
      if (n == name && typed) return Member{off, type, is_static_member(&child), child};
      continue;
    }
    // An anonymous struct or union member, or a base class: its members are this one's.
    Dwarf_Die inner;
    if (!typed || !strip(type, &inner)) continue;
    if (auto m = find_member(&inner, name, names, depth + 1)) {
      m->offset += off;
      return m;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
  return std::nullopt;
}

std::string near_names(std::string_view name, std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  std::vector<std::pair<std::size_t, std::string>> close;
  for (const std::string& n : names) {
    const std::size_t d = edit_distance(name, n, limit);
    if (d <= limit) close.emplace_back(d, n);
  }
  std::sort(close.begin(), close.end());
  std::string out;
  if (!close.empty()) {
    out = "; did you mean: ";
    for (std::size_t i = 0; i < close.size() && i < 3; ++i) {
      out += (i == 0 ? "" : ", ") + close[i].second;
    }
    return out;
  }
  if (names.empty()) return "; it has no members";
  out = "; its members: ";
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) out += (i == 0 ? "" : ", ") + names[i];
  if (names.size() > 8) out += ", ...";
  return out;
}

ValueType value_type(Cursor& c) {
  ValueType v;
  v.name = cursor_type_name(c);
  Dwarf_Die t;
  if (!c.dims.empty()) {
    Dwarf_Die elem;
    if (c.dims.size() == 1 && element_of(c, &elem) && strip(elem, &t) &&
        dwarf_tag(&t) == DW_TAG_base_type) {
      const auto enc = udata(&t, DW_AT_encoding).value_or(0);
      if (enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char) v.kind = ValueKind::kCharArray;
    }
    return v;
  }
  if (!strip(c.type, &t)) return v;
  switch (dwarf_tag(&t)) {
    case DW_TAG_base_type:
      switch (udata(&t, DW_AT_encoding).value_or(0)) {
        case DW_ATE_boolean:
          v.kind = ValueKind::kBool;
          break;
        case DW_ATE_signed:
        case DW_ATE_signed_char:
          v.kind = ValueKind::kSigned;
          break;
        case DW_ATE_unsigned:
        case DW_ATE_unsigned_char:
        case DW_ATE_UTF:
          v.kind = ValueKind::kUnsigned;
          break;
        case DW_ATE_float:
          v.kind = ValueKind::kFloat;
          break;
        default:
          break;
      }
      break;
    case DW_TAG_enumeration_type: {
      v.kind = ValueKind::kEnum;
      Dwarf_Die e;
      if (dwarf_child(&t, &e) == 0) {
        do {
          Dwarf_Attribute attr;
          Dwarf_Sword value = 0;
          if (dwarf_tag(&e) == DW_TAG_enumerator &&
              dwarf_attr(&e, DW_AT_const_value, &attr) != nullptr &&
              dwarf_formsdata(&attr, &value) == 0) {
            v.enumerators.emplace_back(value, name_of(&e));
          }
        } while (dwarf_siblingof(&e, &e) == 0);
      }
      break;
    }
    case DW_TAG_pointer_type:
      v.kind = ValueKind::kPointer;
      break;
    default:
      break;
  }
  return v;
}

// An error of a path, named by its field ("member: ...", "index: ...", "pointer: ...").
std::unexpected<Error> path_error(ErrorCode code, const char* field, const std::string& text) {
  return make_error(code, std::string(field) + ": " + text);
}

// Reads the pointer at the cursor and moves onto what it points to (element `index`).
Result<void> follow(Cursor& c, std::uint64_t index, const MemoryReader& read,
                    std::vector<std::string>& notes) {
  Dwarf_Die t, pointee;
  if (!c.dims.empty() || !strip(c.type, &t) || dwarf_tag(&t) != DW_TAG_pointer_type) {
    return path_error(ErrorCode::kInval, "pointer",
                      "'" + c.spelled + "' is a " + cursor_type_name(c) + ", not a pointer");
  }
  if (!ref(&t, DW_AT_type, &pointee)) {
    return path_error(ErrorCode::kInval, "pointer",
                      "'" + c.spelled + "' is a void*: what it points to has no type");
  }
  std::uint8_t bytes[8] = {};
  if (auto r = read(c.addr, bytes); !r) {
    return std::unexpected(r.error().with_context("reading the pointer '" + c.spelled + "'"));
  }
  std::uint64_t value = 0;
  std::memcpy(&value, bytes, sizeof value);
  if (value == 0) {
    return path_error(ErrorCode::kFault, "pointer", "'" + c.spelled + "' is a null pointer");
  }
  Dwarf_Die stripped;
  Dwarf_Word elem_size = 0;
  if (index != 0 &&
      (!strip(pointee, &stripped) || dwarf_aggregate_size(&stripped, &elem_size) != 0)) {
    return path_error(ErrorCode::kInval, "pointer",
                      "'" + c.spelled + "': the size of " + type_name(pointee) + " is unknown");
  }
  notes.push_back("'" + c.spelled + "' (" + type_name(c.type) + ") was read once: " + hex(value) +
                  "; the watch stays there if the pointer changes");
  c = land(value + index * elem_size, pointee, c.spelled);
  return {};
}

// The qualified name of static member `decl`: the demangled linkage name of its definition (the
// variable whose DW_AT_specification is `decl`); "" when there is none.
std::string static_member_name(Dwfl_Module* mod, Dwarf_Die* decl) {
  const Dwarf_Off wanted = dwarf_dieoffset(decl);
  std::string out;
  walk_units(mod, [&](Dwarf_Die& die, Dwarf_Die*) {
    Dwarf_Die spec;
    if (dwarf_tag(&die) != DW_TAG_variable || !ref(&die, DW_AT_specification, &spec) ||
        dwarf_dieoffset(&spec) != wanted) {
      return false;
    }
    Dwarf_Attribute attr;
    const char* linkage = nullptr;
    if (dwarf_attr_integrate(&die, DW_AT_linkage_name, &attr) != nullptr) {
      linkage = dwarf_formstring(&attr);
    }
    if (linkage == nullptr) return false;
    int status = 0;
    char* text = abi::__cxa_demangle(linkage, nullptr, nullptr, &status);
    if (text != nullptr && status == 0) out = text;
    std::free(text);
    return true;
  });
  return out;
}

Result<void> member(Dwfl_Module* mod, Cursor& c, std::string_view name,
                    const std::string& spelled) {
  Dwarf_Die t;
  const int tag = c.dims.empty() && strip(c.type, &t) ? dwarf_tag(&t) : 0;
  if (tag != DW_TAG_structure_type && tag != DW_TAG_class_type && tag != DW_TAG_union_type) {
    return path_error(ErrorCode::kInval, "member",
                      "'" + c.spelled + "' is a " + cursor_type_name(c) +
                          ", not a struct, class or union: it has no member '" + std::string(name) +
                          "'");
  }
  std::vector<std::string> names;
  auto m = find_member(&t, name, names);
  if (!m) {
    return path_error(ErrorCode::kNoEnt, "member",
                      "'" + c.spelled + "' (" + type_name(c.type) + ") has no member '" +
                          std::string(name) + "'" + near_names(name, names));
  }
  if (m->is_static) {
    std::string qualified = static_member_name(mod, &m->decl);
    if (qualified.empty()) qualified = type_name(t) + "::" + std::string(name);
    return path_error(ErrorCode::kInval, "member",
                      "'" + std::string(name) + "' is a static member of " + type_name(t) +
                          ", not in '" + c.spelled + "': watch it as " + qualified);
  }
  c = land(c.addr + m->offset, m->type, spelled);
  return {};
}

Result<void> element(Cursor& c, std::uint64_t index, const std::string& spelled) {
  const std::uint64_t count = c.dims.front();
  if (count != kUnknownCount && index >= count) {
    return path_error(ErrorCode::kRange, "index",
                      std::to_string(index) + " is past the end of '" + c.spelled + "' (" +
                          cursor_type_name(c) + ": 0 to " + std::to_string(count - 1) + ")");
  }
  Dwarf_Die elem, stripped;
  Dwarf_Word stride = 0;
  if (!element_of(c, &elem) || !strip(elem, &stripped) ||
      dwarf_aggregate_size(&stripped, &stride) != 0) {
    return path_error(ErrorCode::kInval, "index",
                      "'" + c.spelled + "': the size of its elements is unknown");
  }
  c.dims.erase(c.dims.begin());
  for (std::uint64_t d : c.dims) stride *= d == kUnknownCount ? 0 : d;
  c.addr += index * stride;
  c.spelled = spelled;
  if (c.dims.empty()) c = land(c.addr, elem, spelled);
  return {};
}

bool name_start(char ch) {
  return std::isalpha(static_cast<unsigned char>(ch)) || ch == '_';
}
bool name_char(char ch) {
  return name_start(ch) || std::isdigit(static_cast<unsigned char>(ch));
}

// An index: decimal, or hexadecimal with 0x.
std::optional<std::uint64_t> index_value(std::string_view text) {
  if (text.empty()) return std::nullopt;
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  std::uint64_t v = 0;
  for (char ch : text) {
    int d = -1;
    if (std::isdigit(static_cast<unsigned char>(ch))) d = ch - '0';
    if (base == 16 && std::isxdigit(static_cast<unsigned char>(ch))) {
      d = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0' : (std::tolower(ch) - 'a' + 10);
    }
    if (d < 0) return std::nullopt;
    if (v >
        (~std::uint64_t{0} - static_cast<std::uint64_t>(d)) / static_cast<std::uint64_t>(base)) {
      return std::nullopt;
    }
    v = v * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(d);
  }
  return v;
}

}  // namespace

Result<SourceObject> object_at(Dwfl_Module* mod, const SourceObject& base, std::string_view path,
                               const MemoryReader& read) {
  Dwarf_Addr bias = 0;
  Dwarf* dw = dwfl_module_getdwarf(mod, &bias);
  std::optional<Dwarf_Die> var;
  if (dw != nullptr) {
    const std::uint64_t link_addr = base.symbol.address - bias;
    walk_units(mod, [&](Dwarf_Die& die, Dwarf_Die*) {
      if (dwarf_tag(&die) != DW_TAG_variable) return false;
      Dwarf_Attribute attr;
      Dwarf_Op* ops = nullptr;
      std::size_t n = 0;
      if (dwarf_attr(&die, DW_AT_location, &attr) == nullptr ||
          dwarf_getlocation(&attr, &ops, &n) != 0 || n != 1 || ops[0].atom != DW_OP_addr ||
          ops[0].number != link_addr) {
        return false;
      }
      var = die;
      return true;
    });
  }
  Dwarf_Die type;
  if (!var || !ref(&*var, DW_AT_type, &type)) {
    if (path.empty()) return base;
    return path_error(ErrorCode::kInval, "dwarf",
                      "no DWARF type for '" + base.symbol.name + "' in " + base.symbol.module +
                          " (built without -g?): '" + std::string(path) + "' needs it");
  }
  SourceObject out = base;
  Cursor c = land(base.symbol.address, type, base.symbol.name);
  std::size_t pos = 0;
  while (pos < path.size()) {
    const std::size_t start = pos;
    if (path[pos] == '.' || path.substr(pos).starts_with("->")) {
      const bool arrow = path[pos] == '-';
      pos += arrow ? 2 : 1;
      const std::size_t name_at = pos;
      if (pos < path.size() && name_start(path[pos])) {
        while (pos < path.size() && name_char(path[pos])) ++pos;
      }
      const std::string_view name = path.substr(name_at, pos - name_at);
      if (name.empty()) {
        return path_error(ErrorCode::kInval, "member",
                          "expected a member name after '" +
                              std::string(path.substr(start, name_at - start)) + "' in '" +
                              c.spelled + std::string(path.substr(start)) + "'");
      }
      const std::string spelled = c.spelled + std::string(path.substr(start, pos - start));
      if (arrow) {
        if (auto r = follow(c, 0, read, out.notes); !r) return std::unexpected(r.error());
      }
      if (auto r = member(mod, c, name, spelled); !r) return std::unexpected(r.error());
    } else if (path[pos] == '[') {
      const std::size_t close = path.find(']', pos);
      if (close == std::string_view::npos) {
        return path_error(ErrorCode::kInval, "index",
                          "expected ']' in '" + std::string(path) + "'");
      }
      const std::string_view text = path.substr(pos + 1, close - pos - 1);
      pos = close + 1;
      const std::string spelled = c.spelled + std::string(path.substr(start, pos - start));
      auto index = index_value(text);
      if (!index) {
        return path_error(ErrorCode::kInval, "index",
                          "'" + spelled + "': the index '" + std::string(text) +
                              "' is not a number (decimal, or hexadecimal with 0x)");
      }
      if (!c.dims.empty()) {
        if (auto r = element(c, *index, spelled); !r) return std::unexpected(r.error());
      } else {
        Dwarf_Die t;
        if (!strip(c.type, &t) || dwarf_tag(&t) != DW_TAG_pointer_type) {
          return path_error(ErrorCode::kInval, "index",
                            "'" + c.spelled + "' is a " + cursor_type_name(c) +
                                ", not an array or pointer: it has no '[" + std::string(text) +
                                "]'");
        }
        if (auto r = follow(c, *index, read, out.notes); !r) return std::unexpected(r.error());
        c.spelled = spelled;
      }
    } else {
      return path_error(ErrorCode::kInval, "member",
                        "unexpected '" + std::string(1, path[pos]) + "' after '" + c.spelled +
                            "' (expected '.', '->' or '[')");
    }
  }
  out.address = c.addr;
  out.size = size_of(c);
  if (out.size == 0 && path.empty()) out.size = base.size;
  out.type = value_type(c);
  return out;
}

std::optional<std::string> local_of(Dwfl_Module* mod, std::string_view name) {
  std::optional<std::string> found;
  walk_units(mod, [&](Dwarf_Die& die, Dwarf_Die* scope) {
    const int tag = dwarf_tag(&die);
    if (scope == nullptr || (tag != DW_TAG_variable && tag != DW_TAG_formal_parameter)) {
      return false;
    }
    if (name_of(&die) != name) return false;
    Dwarf_Attribute attr;
    Dwarf_Op* ops = nullptr;
    std::size_t n = 0;
    if (dwarf_attr(&die, DW_AT_location, &attr) != nullptr &&
        dwarf_getlocation(&attr, &ops, &n) == 0 && n == 1 && ops[0].atom == DW_OP_addr) {
      return false;  // a function's static: it has a symbol of its own
    }
    std::string function = name_of(scope);
    if (function.empty()) function = "a function";
    std::string text =
        std::string(tag == DW_TAG_formal_parameter ? "a parameter" : "a local variable") + " of " +
        function;
    int line = 0;
    const char* file = dwarf_decl_file(&die);
    if (file != nullptr && dwarf_decl_line(&die, &line) == 0) {
      const char* slash = std::strrchr(file, '/');
      text += " (" + std::string(slash != nullptr ? slash + 1 : file) + ":" + std::to_string(line) +
              ")";
    }
    found = std::move(text);
    return true;
  });
  return found;
}

}  // namespace hwarb::native::dwarf
