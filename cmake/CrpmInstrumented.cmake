# crpm_instrumented_objects(<out-var> FLAGS <clang flags...> SOURCES <files...>):
# compiles each source with clang-14 and the libcrpm pass plugin (tests and
# benchmarks of this project, whose own compiler may be gcc) and returns the
# object files, to add to an executable like sources (.cpp: clang++-14).  Use FLAGS for
# optimisation and -I paths; PLAIN ON compiles without the plugin (the
# uninstrumented baseline, with the same compiler).
function(crpm_instrumented_objects out)
  cmake_parse_arguments(A "PLAIN" "TAG" "FLAGS;SOURCES" ${ARGN})
  set(objs)
  foreach(src IN LISTS A_SOURCES)
    get_filename_component(abs ${src} ABSOLUTE)
    get_filename_component(name ${src} NAME)
    get_filename_component(ext ${src} LAST_EXT)
    set(cc ${CRPM_CLANG})
    if(ext STREQUAL ".cpp")
      set(cc ${CRPM_CLANGXX})
    endif()
    set(obj ${CMAKE_CURRENT_BINARY_DIR}/instr_${A_TAG}_${name}.o)
    if(A_PLAIN)
      set(plugin)
      set(dep)
    else()
      set(plugin -fpass-plugin=$<TARGET_FILE:crpm_instrument>)
      set(dep crpm_instrument)
    endif()
    add_custom_command(OUTPUT ${obj}
      COMMAND ${cc} ${plugin} -c ${abs} -o ${obj} -fPIE -D_GNU_SOURCE
              -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_BINARY_DIR}/include ${A_FLAGS}
      DEPENDS ${abs} ${dep} IMPLICIT_DEPENDS C ${abs}
      COMMENT "clang-14 ${plugin} ${name}" VERBATIM)
    list(APPEND objs ${obj})
  endforeach()
  set(${out} ${objs} PARENT_SCOPE)
endfunction()
