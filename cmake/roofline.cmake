# Project-wide compile settings and helpers.
add_library(roofline_options INTERFACE)
target_compile_options(roofline_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${ROOFLINE_WERROR}>>:-Werror>)
target_include_directories(roofline_options INTERFACE
  "${CMAKE_SOURCE_DIR}/include" "${CMAKE_SOURCE_DIR}/src")
target_link_libraries(roofline_options INTERFACE Threads::Threads)

# roofline_add_test(NAME [WHOLE] SOURCES... LIBS ...): one GoogleTest binary, its tests registered
# with CTest one by one — or, with WHOLE, as one CTest entry for the whole binary: GPU test
# binaries hold thousands of cases and each CTest process would pay a CUDA context (seen on the
# H200: ~2 s each, 5000 cases past the device call's time limit). Tests read fixtures relative to
# the source tree.
function(roofline_add_test name)
  cmake_parse_arguments(ARG "WHOLE" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} roofline_options GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE ROOFLINE_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  if(ARG_WHOLE)
    add_test(NAME ${name} COMMAND ${name} --gtest_brief=1 WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}")
    # A binary whose cases skipped (no GPU) reports as skipped, not as passed.
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
                         ENVIRONMENT "ROOFLINE_POISON_KV=1")
  else()
    # ROOFLINE_POISON_KV: the CPU KV cache starts as NaN, so a read of a slot nothing wrote fails a
    # test instead of passing for zeros (kv_cache.h).
    gtest_discover_tests(${name} WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}" DISCOVERY_TIMEOUT 60
                         PROPERTIES ENVIRONMENT "ROOFLINE_POISON_KV=1")
  endif()
endfunction()
