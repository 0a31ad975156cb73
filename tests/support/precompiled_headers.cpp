// The source of hwarb_test_pch and hwarb_property_pch (tests/support/CMakeLists.txt): executables
// that exist to own the precompiled headers the gtest binaries reuse. They are never run.
int main() {
  return 0;
}
