# Finds Qpid Proton C++. Debian ships no CMake config for it and its .pc file
# requires modules Debian lacks, so locate the header and library directly.
find_path(ProtonCpp_INCLUDE_DIR proton/container.hpp)
find_library(ProtonCpp_LIBRARY qpid-proton-cpp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ProtonCpp DEFAULT_MSG ProtonCpp_LIBRARY ProtonCpp_INCLUDE_DIR)
if(ProtonCpp_FOUND AND NOT TARGET Proton::cpp)
  add_library(Proton::cpp UNKNOWN IMPORTED)
  set_target_properties(Proton::cpp PROPERTIES
    IMPORTED_LOCATION "${ProtonCpp_LIBRARY}"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${ProtonCpp_INCLUDE_DIR}")
endif()
