# Runs one program and checks BOTH its exit code and its output, which CTest's
# PASS_REGULAR_EXPRESSION alone does not (it ignores the exit code).
#   cmake -DPROGRAM=path -DARGS="a@@b@@c" -DEXIT=N -DREGEX=re -P expect_output.cmake
# ARGS separates arguments with "@@" (CMake lists cannot pass through add_test intact). The
# regular expression is matched against stdout and stderr together.
string(REPLACE "@@" ";" args "${ARGS}")
execute_process(COMMAND "${PROGRAM}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
set(text "${out}${err}")
if(NOT "${rc}" STREQUAL "${EXIT}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXIT}; output:\n${text}")
endif()
if(NOT text MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}':\n${text}")
endif()
