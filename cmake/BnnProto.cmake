# bnn_proto_library(NAME <target> PROTOS <files...> IMPORT_DIR <dirs...>
#                   [DEPS <libraries...>] [GRPC])
# Generates C++ (and optionally gRPC) sources for PROTOS into the build tree
# and builds them as a static library exposing the generated headers.
function(bnn_proto_library)
  cmake_parse_arguments(P "GRPC" "NAME" "IMPORT_DIR;PROTOS;DEPS" ${ARGN})
  add_library(${P_NAME} STATIC ${P_PROTOS})
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/gen)
  file(MAKE_DIRECTORY ${out_dir})
  protobuf_generate(TARGET ${P_NAME} LANGUAGE cpp
    IMPORT_DIRS ${P_IMPORT_DIR} PROTOC_OUT_DIR ${out_dir})
  if(P_GRPC)
    protobuf_generate(TARGET ${P_NAME} LANGUAGE grpc
      GENERATE_EXTENSIONS .grpc.pb.h .grpc.pb.cc
      PLUGIN "protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>"
      IMPORT_DIRS ${P_IMPORT_DIR} PROTOC_OUT_DIR ${out_dir})
    target_link_libraries(${P_NAME} PUBLIC gRPC::grpc++)
  endif()
  target_include_directories(${P_NAME} PUBLIC ${out_dir})
  target_link_libraries(${P_NAME} PUBLIC protobuf::libprotobuf ${P_DEPS})
  # Generated code is not ours to lint.
  target_compile_options(${P_NAME} PRIVATE -w)
endfunction()
