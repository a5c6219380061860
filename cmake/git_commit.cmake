# git_commit.cmake -DSRC=DIR -DOUT=FILE — writes FILE as `#define TT_GIT_COMMIT "..."` (git describe of DIR,
# "unknown" outside git), rewriting it only when the text changes. Run at every build, not only at configure time: a
# binary rebuilt after a pull that touched no CMakeLists.txt must not carry the old commit in its build record
# (src/cmd/build.c), or two builds of different code would pass the ranks' start-up exchange as one.
execute_process(COMMAND git describe --always --dirty --abbrev=12 WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit unknown)
endif()
file(WRITE ${OUT}.new "#define TT_GIT_COMMIT \"${commit}\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.new ${OUT})
file(REMOVE ${OUT}.new)
