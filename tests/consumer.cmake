# find_package(qattn) and pkg-config from an installed tree, with one op run.
add_test(NAME consumer_package
         COMMAND ${CMAKE_COMMAND} -D BUILD_DIR=${PROJECT_BINARY_DIR}
                 -D SOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/consumer
                 -D WORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer_work
                 -D C_COMPILER=${CMAKE_C_COMPILER} -D GENERATOR=${CMAKE_GENERATOR}
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run_consumer.cmake)
set_tests_properties(consumer_package PROPERTIES LABELS "consumer" TIMEOUT 300)
