# Runs qattn-bench once as CI's check of its command line (bench/CMakeLists.txt
# registers the cases):
#   cmake -DBENCH=<exe> -DARGS=<a;b;...> -DRC=<exit status> [-DEXPECT=<regex;...>]
#         [-DJSON=<file> -DPYTHON=<python3> -DTABLE=<perf_table.py>] -P cli_test.cmake
# Fails unless the exit status is RC and the output matches every EXPECT
# regex. With JSON, the file the run wrote goes through perf_table.py, which
# recomputes each decode's byte count and refuses a file where it differs.
execute_process(COMMAND ${BENCH} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL RC)
  message(FATAL_ERROR "qattn-bench ${ARGS}: exit status ${rc}, want ${RC}")
endif()
foreach(re ${EXPECT})
  if(NOT "${out}${err}" MATCHES "${re}")
    message(FATAL_ERROR "qattn-bench ${ARGS}: output lacks /${re}/")
  endif()
endforeach()
if(JSON)
  execute_process(COMMAND ${PYTHON} ${TABLE} ${JSON} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "perf_table.py ${JSON}: exit status ${rc}")
  endif()
  if(NOT out MATCHES "\\| shape1 \\| [0-9.]+ MB \\|")
    message(FATAL_ERROR "perf_table.py ${JSON}: no decode row for shape1")
  endif()
endif()
