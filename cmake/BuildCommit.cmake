# cmake -DSOURCE_DIR=... -DOUT=... -P BuildCommit.cmake
# Writes OUT, a header defining BNN_BUILD_COMMIT as the abbreviated git commit
# of SOURCE_DIR ("-dirty" appended when tracked files differ from it,
# "unknown" outside a git checkout, e.g. in a Docker build context). OUT is
# rewritten only when its text changes, so a build at the same commit
# recompiles nothing.
execute_process(
  COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE commit
  OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE failed
  ERROR_QUIET)
if(failed OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(
    COMMAND git -C "${SOURCE_DIR}" diff --quiet HEAD --
    RESULT_VARIABLE dirty
    ERROR_QUIET)
  if(dirty)
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "#define BNN_BUILD_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
