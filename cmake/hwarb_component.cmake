# Every C++ target of hwarb (components, their tests, the CLI, benchmarks) is compiled with
# HWARB_RESULT_FLAGS, set here for the whole tree: a dropped Result (hwarb/base/error.h, a
# [[nodiscard]] type) or a dropped [[nodiscard]] value is a compile error in every build type
# (the sanitizer builds of scripts/test included), with or without -Werror.
# tests/headers' result_dropped checks that a translation unit dropping a Result fails to compile.
set(HWARB_RESULT_FLAGS -Wunused-result -Werror=unused-result)
add_compile_options(${HWARB_RESULT_FLAGS})

# hwarb_component(NAME [INTERNAL]
#   SOURCES src/a.cpp ...            library sources (none: header-only INTERFACE target)
#   DEPS hwarb::base ...             public dependencies
#   TESTS src/a_test.cpp ...         unit tests, built into NAME_test, labelled `unit`
#   TEST_DEPS ...                    extra libraries for the tests)
#
# Makes the target hwarb_NAME with alias hwarb::NAME, public headers in NAME/include: static or
# shared as BUILD_SHARED_LIBS says (shared ones with a SONAME), position-independent, C++23 as a
# public compile feature (its users get it too). Unless INTERNAL (a library of the CLI only, always
# static), it is installed and exported as hwarb::NAME (hwarbTargets, the package's component
# NAME) with its headers. Its tests are made only with HWARB_BUILD_TESTS.
function(hwarb_component name)
  cmake_parse_arguments(ARG "INTERNAL" "" "SOURCES;DEPS;TESTS;TEST_DEPS" ${ARGN})
  set(target hwarb_${name})
  set(include_dir ${CMAKE_CURRENT_SOURCE_DIR}/include)
  if(ARG_SOURCES)
    if(ARG_INTERNAL)
      add_library(${target} STATIC ${ARG_SOURCES})
    else()
      add_library(${target} ${ARG_SOURCES})
      # Installed shared libraries find each other beside themselves.
      set_target_properties(${target} PROPERTIES VERSION ${PROJECT_VERSION}
                                                 SOVERSION ${HWARB_SOVERSION}
                                                 INSTALL_RPATH "$ORIGIN")
    endif()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${include_dir}>
                                                $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${target} PUBLIC ${ARG_DEPS})
    target_compile_features(${target} PUBLIC cxx_std_23)
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${include_dir}>
                                                   $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${target} INTERFACE ${ARG_DEPS})
    target_compile_features(${target} INTERFACE cxx_std_23)
  endif()
  add_library(hwarb::${name} ALIAS ${target})
  set_property(GLOBAL APPEND PROPERTY HWARB_COMPONENTS ${target})
  if(NOT ARG_INTERNAL)
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
    install(TARGETS ${target} EXPORT hwarbTargets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
            RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
    # Several components share one include directory: installed once.
    get_property(done GLOBAL PROPERTY HWARB_INSTALLED_INCLUDES)
    if(EXISTS ${include_dir} AND NOT include_dir IN_LIST done)
      install(DIRECTORY ${include_dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
      set_property(GLOBAL APPEND PROPERTY HWARB_INSTALLED_INCLUDES ${include_dir})
    endif()
  endif()
  if(ARG_TESTS AND HWARB_BUILD_TESTS)
    hwarb_test(${name}_test LABELS unit SOURCES ${ARG_TESTS} DEPS ${target} ${ARG_TEST_DEPS})
  endif()
endfunction()

# hwarb_test(NAME LABELS l1 l2 SOURCES ... DEPS ...): one gtest executable, one ctest entry
# (nothing without HWARB_BUILD_TESTS). Its main() is tests/support's (skips reported and logged).
function(hwarb_test name)
  if(NOT HWARB_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} hwarb_test_main GTest::gtest GTest::gmock)
  # The Check build type compiles test sources at -O0 (they are most of the compile time), except
  # property tests: their generators and models run thousands of cases (-O0 made them 2.5-4x
  # slower to run, more than it saved in compiling them).
  # gtest and gmock (and rapidcheck for property tests) come precompiled (tests/support).
  # HWARB_TEST_FLAGS: the tests' own sources without UBSan's checks (a quarter of their compile
  # time); the code they drive keeps them all, ASan's too.
  target_compile_options(${name} PRIVATE ${HWARB_TEST_FLAGS})
  if("property" IN_LIST ARG_LABELS)
    target_precompile_headers(${name} REUSE_FROM hwarb_property_pch)
  else()
    target_compile_options(${name} PRIVATE $<$<CONFIG:Check>:-O0>)
    target_precompile_headers(${name} REUSE_FROM hwarb_test_pch)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
  hwarb_test_stage(${name} NEEDS ${name})
endfunction()

# hwarb_test_stage(TEST [NEEDS target ...]): the one build of scripts/test that runs TEST, from
# the labels TEST already has, added to them as a label stage_<build>; the NEEDS targets (what the
# test runs) become dependencies of the target hwarb_stage_<build>, which that build makes and
# nothing more. Every test is given its stage where it is added; scripts/test fails when any
# test has none, so that no test is left out of every build.
#   1. `race`                         -> tsan     (ThreadSanitizer)
#   2. `bench`, `timing`, `install`,  -> release  (optimised code: speed is what they check; or
#      `uninstrumented`, `compile`                no sanitizer: an installed package, limits
#                                                 that shadow memory defeats; or what the
#                                                 compiler refuses, checked once)
#   3. anything else                  -> asan     (AddressSanitizer + UBSan)
function(hwarb_test_stage test)
  if(NOT HWARB_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "NEEDS" ${ARGN})
  get_test_property(${test} LABELS labels)
  if(NOT labels)
    message(FATAL_ERROR "test ${test} has no labels: its stage is decided from them")
  endif()
  set(stage asan)
  if("race" IN_LIST labels)
    set(stage tsan)
  else()
    foreach(label bench timing install uninstrumented compile)
      if(label IN_LIST labels)
        set(stage release)
      endif()
    endforeach()
  endif()
  set_tests_properties(${test} PROPERTIES LABELS "${labels};stage_${stage}")
  if(ARG_NEEDS)
    add_dependencies(hwarb_stage_${stage} ${ARG_NEEDS})
  endif()
endfunction()
