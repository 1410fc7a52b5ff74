# Conformance: ONNX's backend test data (Debian package libonnx-testdata), one CTest
# per folder. Each run must pass every case listed in tests/conformance/<folder>.passing;
# regenerate the lists with scripts/update_conformance_lists.sh after adding kernels.
set(PARTITA_ONNX_TESTDATA /usr/share/libonnx-testdata/data CACHE PATH "ONNX backend test data")
if(EXISTS ${PARTITA_ONNX_TESTDATA}/node)
  foreach(folder node simple pytorch-converted pytorch-operator)
    string(REPLACE "-" "_" test_name "conformance_${folder}")
    add_test(NAME ${test_name}
      COMMAND $<TARGET_FILE:partita> conformance ${PARTITA_ONNX_TESTDATA}/${folder}
              --expect ${CMAKE_SOURCE_DIR}/tests/conformance/${folder}.passing)
    set_tests_properties(${test_name} PROPERTIES TIMEOUT 1200 LABELS conformance)
  endforeach()
  # The same lists with oneDNN taking what it supports: a case passing on the host
  # must pass with dnnl,host too (15-20 s for the three folders on 2 cores).
  if("dnnl" IN_LIST PARTITA_BACKENDS)
    foreach(folder node pytorch-converted pytorch-operator)
      string(REPLACE "-" "_" test_name "conformance_${folder}_dnnl")
      add_test(NAME ${test_name}
        COMMAND $<TARGET_FILE:partita> conformance ${PARTITA_ONNX_TESTDATA}/${folder} --backends dnnl,host
                --expect ${CMAKE_SOURCE_DIR}/tests/conformance/${folder}.passing)
      set_tests_properties(${test_name} PROPERTIES TIMEOUT 1200 LABELS conformance)
    endforeach()
  endif()
  # And with ewise fusing the elementwise ops (node: about 5 s on 2 cores).
  if("ewise" IN_LIST PARTITA_BACKENDS)
    foreach(folder node pytorch-converted)
      string(REPLACE "-" "_" test_name "conformance_${folder}_ewise")
      add_test(NAME ${test_name}
        COMMAND $<TARGET_FILE:partita> conformance ${PARTITA_ONNX_TESTDATA}/${folder} --backends ewise,host
                --expect ${CMAKE_SOURCE_DIR}/tests/conformance/${folder}.passing)
      set_tests_properties(${test_name} PROPERTIES TIMEOUT 1200 LABELS conformance)
    endforeach()
  endif()
else()
  message(STATUS "ONNX backend test data not found in ${PARTITA_ONNX_TESTDATA}: conformance tests disabled")
endif()
