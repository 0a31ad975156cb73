#include "hwarb/linux/link_map.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "hwarb/linux/proc_maps.h"

namespace hwarb::native {
namespace {

// The test process itself: the walk must list what the dynamic linker reports to
// dl_iterate_phdr, in the same order, with the same load biases.
TEST(LinkMap, ListsThisProcessAsTheDynamicLinkerDoes) {
  auto auxv = read_proc_file(::getpid(), "auxv");
  ASSERT_TRUE(auxv.has_value()) << auxv.error().to_string();
  const MemoryReader self = [](std::uint64_t addr, std::span<std::uint8_t> out) -> Result<void> {
    std::memcpy(out.data(), reinterpret_cast<const void*>(addr), out.size());
    return {};
  };
  auto map = read_link_map(std::span<const std::uint8_t>(
                               reinterpret_cast<const std::uint8_t*>(auxv->data()), auxv->size()),
                           self);
  ASSERT_TRUE(map.has_value()) << map.error().to_string();
  EXPECT_NE(map->main_lm, 0u);
  struct Seen {
    std::string name;
    std::uint64_t bias;
  };
  std::vector<Seen> seen;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        static_cast<std::vector<Seen>*>(data)->push_back(
            {info->dlpi_name != nullptr ? info->dlpi_name : "", info->dlpi_addr});
        return 0;
      },
      &seen);
  // dl_iterate_phdr lists the executable first (name ""), as the chain's first entry.
  ASSERT_GE(seen.size(), 2u);
  std::vector<Seen> libs(seen.begin() + 1, seen.end());
  ASSERT_EQ(map->libraries.size(), libs.size());
  bool libc = false;
  for (std::size_t i = 0; i < libs.size(); ++i) {
    EXPECT_EQ(map->libraries[i].name, libs[i].name) << i;
    EXPECT_EQ(map->libraries[i].l_addr, libs[i].bias) << libs[i].name;
    EXPECT_NE(map->libraries[i].l_ld, 0u);
    libc |= libs[i].name.find("libc.so") != std::string::npos;
  }
  EXPECT_TRUE(libc);
  const std::string xml = svr4_library_xml(*map);
  EXPECT_EQ(xml.rfind("<library-list-svr4 version=\"1.0\" main-lm=\"0x", 0), 0u) << xml;
  EXPECT_NE(xml.find("libc.so"), std::string::npos);
}

// A memory image: auxv -> phdrs -> dynamic -> r_debug -> a chain, built by hand.
class Image {
 public:
  static constexpr std::uint64_t kBase = 0x10000;
  Image() : bytes_(0x2000, 0) {}
  template <typename T>
  void put(std::uint64_t addr, const T& value) {
    std::memcpy(bytes_.data() + (addr - kBase), &value, sizeof value);
  }
  void put_string(std::uint64_t addr, const std::string& s) {
    std::memcpy(bytes_.data() + (addr - kBase), s.c_str(), s.size() + 1);
  }
  MemoryReader reader() const {
    return [this](std::uint64_t addr, std::span<std::uint8_t> out) -> Result<void> {
      if (addr < kBase || addr + out.size() > kBase + bytes_.size()) {
        return make_error(ErrorCode::kFault, "addr: " + std::to_string(addr) + " unmapped");
      }
      std::memcpy(out.data(), bytes_.data() + (addr - kBase), out.size());
      return {};
    };
  }
  std::vector<std::uint8_t> auxv(std::uint64_t phdr, std::uint64_t phnum) const {
    std::vector<std::uint8_t> out;
    const Elf64_auxv_t entries[] = {{AT_PHDR, {phdr}}, {AT_PHNUM, {phnum}}, {AT_NULL, {0}}};
    out.resize(sizeof entries);
    std::memcpy(out.data(), entries, sizeof entries);
    return out;
  }

 private:
  std::vector<std::uint8_t> bytes_;
};

// Program headers at 0x10040 (vaddr 0x40: bias 0x10000), dynamic at 0x10200, r_debug at 0x10400,
// the chain at 0x10600 + 0x40 * i, names at 0x10800 + 0x100 * i.
Image chain(int libraries, std::uint64_t debug, bool loop = false) {
  Image image;
  Elf64_Phdr ph{};
  ph.p_type = PT_PHDR;
  ph.p_vaddr = 0x40;
  image.put(0x10040, ph);
  ph.p_type = PT_DYNAMIC;
  ph.p_vaddr = 0x200;
  image.put(0x10040 + sizeof ph, ph);
  Elf64_Dyn dyn{};
  dyn.d_tag = DT_NEEDED;
  image.put(0x10200, dyn);
  dyn.d_tag = DT_DEBUG;
  dyn.d_un.d_ptr = debug;
  image.put(0x10200 + sizeof dyn, dyn);
  dyn.d_tag = DT_NULL;
  image.put(0x10200 + 2 * sizeof dyn, dyn);
  image.put<std::uint64_t>(0x10400 + offsetof(struct r_debug, r_map), 0x10600);
  for (int i = 0; i <= libraries; ++i) {
    const std::uint64_t lm = 0x10600 + 0x40 * static_cast<std::uint64_t>(i);
    const std::uint64_t name = 0x10800 + 0x100 * static_cast<std::uint64_t>(i);
    image.put_string(name, i == 0 ? "" : "/lib/lib" + std::to_string(i) + ".so <&>");
    image.put<std::uint64_t>(lm + offsetof(struct link_map, l_addr), 0x7000000 * i);
    image.put<std::uint64_t>(lm + offsetof(struct link_map, l_name), name);
    image.put<std::uint64_t>(lm + offsetof(struct link_map, l_ld), 0x7000100 * i);
    const std::uint64_t next = i == libraries ? (loop ? 0x10600 : 0) : lm + 0x40;
    image.put<std::uint64_t>(lm + offsetof(struct link_map, l_next), next);
  }
  return image;
}

TEST(LinkMap, WalksAHandBuiltChain) {
  const Image image = chain(2, 0x10400);
  auto map = read_link_map(image.auxv(0x10040, 2), image.reader());
  ASSERT_TRUE(map.has_value()) << map.error().to_string();
  EXPECT_EQ(map->main_lm, 0x10600u);
  ASSERT_EQ(map->libraries.size(), 2u);
  EXPECT_EQ(map->libraries[1], (LoadedObject{.lm = 0x10680,
                                             .name = "/lib/lib2.so <&>",
                                             .l_addr = 0xe000000,
                                             .l_ld = 0xe000200,
                                             .lmid = 0x10400}));
  EXPECT_EQ(svr4_library_xml(*map),
            "<library-list-svr4 version=\"1.0\" main-lm=\"0x10600\">"
            "<library name=\"/lib/lib1.so &lt;&amp;&gt;\" lm=\"0x10640\" l_addr=\"0x7000000\" "
            "l_ld=\"0x7000100\" lmid=\"0x10400\"/>"
            "<library name=\"/lib/lib2.so &lt;&amp;&gt;\" lm=\"0x10680\" l_addr=\"0xe000000\" "
            "l_ld=\"0xe000200\" lmid=\"0x10400\"/></library-list-svr4>");
}

// dlmopen's namespaces: r_debug_extended (r_version 2) chains the next namespace's r_debug
// through r_next; its libraries follow the base namespace's, each with its r_debug as lmid (the
// first entry of a later namespace is a library, not the executable). r_version 1 ends the walk.
TEST(LinkMap, WalksEveryNamespaceOfDlmopen) {
  Image image = chain(1, 0x10400);
  image.put<std::int32_t>(0x10400 + offsetof(struct r_debug, r_version), 2);
  image.put<std::uint64_t>(0x10400 + sizeof(struct r_debug), 0x10500);
  image.put<std::int32_t>(0x10500 + offsetof(struct r_debug, r_version), 2);
  image.put<std::uint64_t>(0x10500 + offsetof(struct r_debug, r_map), 0x10700);
  image.put<std::uint64_t>(0x10500 + sizeof(struct r_debug), 0);
  image.put_string(0x10c00, "/lib/other.so");
  image.put<std::uint64_t>(0x10700 + offsetof(struct link_map, l_addr), 0x9000000);
  image.put<std::uint64_t>(0x10700 + offsetof(struct link_map, l_name), 0x10c00);
  image.put<std::uint64_t>(0x10700 + offsetof(struct link_map, l_ld), 0x9000100);
  image.put<std::uint64_t>(0x10700 + offsetof(struct link_map, l_next), 0);
  auto map = read_link_map(image.auxv(0x10040, 2), image.reader());
  ASSERT_TRUE(map.has_value()) << map.error().to_string();
  EXPECT_EQ(map->main_lm, 0x10600u);
  ASSERT_EQ(map->libraries.size(), 2u);
  EXPECT_EQ(map->libraries[0].lmid, 0x10400u);
  EXPECT_EQ(map->libraries[1], (LoadedObject{.lm = 0x10700,
                                             .name = "/lib/other.so",
                                             .l_addr = 0x9000000,
                                             .l_ld = 0x9000100,
                                             .lmid = 0x10500}));
  // Version 1: no r_next to follow, whatever lies after r_debug.
  image.put<std::int32_t>(0x10400 + offsetof(struct r_debug, r_version), 1);
  auto base_only = read_link_map(image.auxv(0x10040, 2), image.reader());
  ASSERT_TRUE(base_only.has_value()) << base_only.error().to_string();
  EXPECT_EQ(base_only->libraries.size(), 1u);
}

TEST(LinkMap, BeforeTheDynamicLinkerRanTheListIsEmpty) {
  const Image image = chain(2, 0);
  auto map = read_link_map(image.auxv(0x10040, 2), image.reader());
  ASSERT_TRUE(map.has_value()) << map.error().to_string();
  EXPECT_EQ(map->main_lm, 0u);
  EXPECT_TRUE(map->libraries.empty());
  EXPECT_EQ(svr4_library_xml(*map), "<library-list-svr4 version=\"1.0\"></library-list-svr4>");
  // No auxv at all: empty too.
  auto none = read_link_map({}, image.reader());
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->libraries.empty());
}

TEST(LinkMap, ALoopOrAnUnreadableEntryIsAnError) {
  const Image looped = chain(3, 0x10400, true);
  auto map = read_link_map(looped.auxv(0x10040, 2), looped.reader());
  ASSERT_FALSE(map.has_value());
  EXPECT_EQ(map.error().code(), ErrorCode::kIo);
  EXPECT_NE(map.error().message().find("link_map: more than"), std::string::npos);
  const Image broken = chain(1, 0x1f000);  // r_debug outside the image
  auto bad = read_link_map(broken.auxv(0x10040, 2), broken.reader());
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kFault);
}

}  // namespace
}  // namespace hwarb::native
