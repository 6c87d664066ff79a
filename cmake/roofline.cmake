# Project-wide compile settings and helpers.
add_library(roofline_options INTERFACE)
target_compile_options(roofline_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${ROOFLINE_WERROR}>>:-Werror>)
target_include_directories(roofline_options INTERFACE
  "${CMAKE_SOURCE_DIR}/include" "${CMAKE_SOURCE_DIR}/src")
target_link_libraries(roofline_options INTERFACE Threads::Threads)

# roofline_add_test(NAME SOURCES... LIBS ...): one GoogleTest binary, its tests registered with
# CTest. Tests read fixtures relative to the source tree.
function(roofline_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} roofline_options GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE ROOFLINE_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  gtest_discover_tests(${name} WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}" DISCOVERY_TIMEOUT 60)
endfunction()
