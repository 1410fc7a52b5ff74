# Conformance: ONNX's backend test data (Debian package libonnx-testdata), one CTest
# per folder. Each run must pass every case listed in tests/conformance/<folder>.passing;
# regenerate the lists with scripts/update_conformance_lists.sh after adding kernels.
set(PARTITA_ONNX_TESTDATA /usr/share/libonnx-testdata/data CACHE PATH "ONNX backend test data")

# conformance_<folder><suffix>: the folder's listed cases with `--backends <backends>`.
function(partita_conformance_tests suffix backends)
  foreach(folder ${ARGN})
    string(REPLACE "-" "_" test_name "conformance_${folder}${suffix}")
    add_test(NAME ${test_name}
      COMMAND $<TARGET_FILE:partita> conformance ${PARTITA_ONNX_TESTDATA}/${folder} --backends ${backends}
              --expect ${CMAKE_SOURCE_DIR}/tests/conformance/${folder}.passing)
    set_tests_properties(${test_name} PROPERTIES TIMEOUT 1200 LABELS conformance)
  endforeach()
endfunction()

if(EXISTS ${PARTITA_ONNX_TESTDATA}/node)
  partita_conformance_tests("" host node simple pytorch-converted pytorch-operator)
  # The same lists with oneDNN taking what it supports: a case passing on the host
  # must pass with dnnl,host too (15-20 s for the three folders on 2 cores).
  if("dnnl" IN_LIST PARTITA_BACKENDS)
    partita_conformance_tests(_dnnl dnnl,host node pytorch-converted pytorch-operator)
  endif()
  # And with ewise fusing the elementwise ops (node: about 5 s on 2 cores).
  if("ewise" IN_LIST PARTITA_BACKENDS)
    partita_conformance_tests(_ewise ewise,host node pytorch-converted)
  endif()
else()
  message(STATUS "ONNX backend test data not found in ${PARTITA_ONNX_TESTDATA}: conformance tests disabled")
endif()
