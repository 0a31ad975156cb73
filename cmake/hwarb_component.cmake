# hwarb_component(NAME
#   SOURCES src/a.cpp ...            library sources (none: header-only INTERFACE target)
#   DEPS hwarb::base ...             public dependencies
#   TESTS src/a_test.cpp ...         unit tests, built into NAME_test, labelled `unit`
#   TEST_DEPS ...                    extra libraries for the tests)
#
# Makes the target hwarb_NAME with alias hwarb::NAME, public headers in NAME/include.
function(hwarb_component name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;TESTS;TEST_DEPS" ${ARGN})
  set(target hwarb_${name})
  if(ARG_SOURCES)
    add_library(${target} STATIC ${ARG_SOURCES})
    target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(${target} PUBLIC ${ARG_DEPS})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(${target} INTERFACE ${ARG_DEPS})
  endif()
  add_library(hwarb::${name} ALIAS ${target})
  set_property(GLOBAL APPEND PROPERTY HWARB_COMPONENTS ${target})
  if(ARG_TESTS AND NOT HWARB_RACE_ONLY)
    hwarb_test(${name}_test LABELS unit SOURCES ${ARG_TESTS} DEPS ${target} ${ARG_TEST_DEPS})
  endif()
endfunction()

# hwarb_test(NAME LABELS l1 l2 SOURCES ... DEPS ...): one gtest executable, one ctest entry.
function(hwarb_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
