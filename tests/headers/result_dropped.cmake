# The ctest result_dropped: a dropped Result is a compile error with hwarb's flags.
#   cmake -DCXX=compiler -DFLAGS=flag;... -DINCLUDE=base/include -DSOURCE=result_dropped.cpp -P this
# result_dropped.cpp compiles when it keeps its Results (HWARB_RESULTS_KEPT), so the flags and the
# include path are right; it must fail without, with one unused-result error per dropped call (3).
set(compile ${CXX} ${FLAGS} -I${INCLUDE} -fsyntax-only ${SOURCE})
execute_process(COMMAND ${compile} -DHWARB_RESULTS_KEPT RESULT_VARIABLE kept ERROR_VARIABLE kept_err)
if(NOT kept EQUAL 0)
  message(FATAL_ERROR "the unit that keeps its Results does not compile:\n${kept_err}")
endif()
execute_process(COMMAND ${compile} RESULT_VARIABLE dropped ERROR_VARIABLE dropped_err)
if(dropped EQUAL 0)
  message(FATAL_ERROR "a unit dropping 3 Results compiled: a dropped Result is no error")
endif()
string(REGEX MATCHALL "unused-result" errors "${dropped_err}")
list(LENGTH errors count)
if(NOT count EQUAL 3)
  message(FATAL_ERROR "expected 3 unused-result errors, got ${count}:\n${dropped_err}")
endif()
message(STATUS "3 dropped Results, 3 compile errors")
