# Install rules for everything but the binary (man pages, shell completions,
# documents), and the CPack settings for the .deb and the .rpm. Included by
# the top CMakeLists.txt after install(TARGETS tfbarrier); scripts/package
# drives it. See packaging/README.md.
include(GNUInstallDirs)

set(TFB_PACKAGE_MAINTAINER "tfbarrier developers <tfbarrier@example.org>"
    CACHE STRING "Maintainer (name <email>) written into the .deb and .rpm")
set(TFB_BASH_COMPLETION_DIR "${CMAKE_INSTALL_DATADIR}/bash-completion/completions"
    CACHE STRING "Where the bash completion goes, relative to the prefix")
set(TFB_ZSH_COMPLETION_DIR "${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions"
    CACHE STRING "Where the zsh completion goes (Debian: zsh/vendor-completions, Fedora: zsh/site-functions)")

set(_tfb_pkg_out ${CMAKE_CURRENT_BINARY_DIR}/packaging)

# Man pages and the Debian changelog, compressed with gzip -9n (no name, no
# time stamp: reproducible), as Debian policy asks and man(1) reads them.
find_program(TFB_GZIP gzip)
string(TIMESTAMP TFB_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)  # honours SOURCE_DATE_EPOCH
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/changelog.in ${_tfb_pkg_out}/changelog @ONLY)

set(_tfb_man_pages man/tfbarrier.1 man/tfbarrier-protocol.7)
set(_tfb_gz_outputs)
foreach(_page IN LISTS _tfb_man_pages)
  get_filename_component(_name ${_page} NAME)
  string(REGEX MATCH "[0-9]$" _section ${_name})
  if(TFB_GZIP)
    add_custom_command(
      OUTPUT ${_tfb_pkg_out}/${_name}.gz
      COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_CURRENT_SOURCE_DIR}/${_page} ${_tfb_pkg_out}/${_name}
      COMMAND ${TFB_GZIP} -9nf ${_tfb_pkg_out}/${_name}
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${_page}
      COMMENT "Compressing ${_page}"
      VERBATIM)
    list(APPEND _tfb_gz_outputs ${_tfb_pkg_out}/${_name}.gz)
    install(FILES ${_tfb_pkg_out}/${_name}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section})
  else()
    install(FILES ${_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section})
  endif()
endforeach()
if(TFB_GZIP)
  add_custom_command(
    OUTPUT ${_tfb_pkg_out}/changelog.gz
    COMMAND ${TFB_GZIP} -9nkf ${_tfb_pkg_out}/changelog
    DEPENDS ${_tfb_pkg_out}/changelog
    COMMENT "Compressing the Debian changelog"
    VERBATIM)
  list(APPEND _tfb_gz_outputs ${_tfb_pkg_out}/changelog.gz)
  install(FILES ${_tfb_pkg_out}/changelog.gz DESTINATION ${CMAKE_INSTALL_DOCDIR})
endif()
add_custom_target(tfb_packaging_files ALL DEPENDS ${_tfb_gz_outputs})

install(FILES completions/tfbarrier.bash DESTINATION ${TFB_BASH_COMPLETION_DIR} RENAME tfbarrier)
install(FILES completions/_tfbarrier DESTINATION ${TFB_ZSH_COMPLETION_DIR})
install(FILES LICENSE README.md CHANGELOG.md packaging/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Alerting rules for Prometheus (docs/monitoring.md, "Alerts"), with their promtool unit tests.
install(FILES packaging/prometheus/tfbarrier.rules.yml packaging/prometheus/tfbarrier.rules.test.yml
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/prometheus)

# ---------------------------------------------------------------- CPack
set(CPACK_PACKAGE_NAME tfbarrier)
set(CPACK_PACKAGE_VENDOR "tfbarrier developers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})  # the same as `tfbarrier --version`
set(CPACK_PACKAGE_CONTACT "${TFB_PACKAGE_MAINTAINER}")
# Debian wants the synopsis without its article: "named, reusable barrier for ...".
string(REGEX REPLACE "^(A|An|The) " "" _tfb_summary "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${_tfb_summary}")
set(CPACK_PACKAGE_DESCRIPTION
    "tfbarrier lets the processes of a job meet at a named, reusable barrier
from a shell script: every task runs `tfbarrier wait --name epoch3`, and a
chief can decide whether the job goes on (exit 0) or stops (exit 1). It
reads its settings from Slurm, torchrun, Open MPI and PMI variables, and
starts its host by itself when none answers.")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_CURRENT_SOURCE_DIR}/LICENSE)
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR DEB)

# .deb: the dependencies come from dpkg-shlibdeps. With TFB_STATIC_RUNTIME
# (the default) libstdc++ and libgcc are linked in and fmt is header-only (the
# hash for authentication is src/core/sha256.cpp), so that is libc6 alone. libmunge is loaded at run time where it is installed, hence
# only a suggestion.
set(CPACK_DEBIAN_PACKAGE_NAME tfbarrier)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # tfbarrier_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TFB_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS munge)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# .rpm: rpmbuild finds the library dependencies (glibc) itself.
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)  # tfbarrier-0.1.0-1.x86_64.rpm
set(CPACK_RPM_PACKAGE_RELEASE 1)
set(CPACK_RPM_PACKAGE_LICENSE MIT)
set(CPACK_RPM_PACKAGE_GROUP "Applications/System")
set(CPACK_RPM_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
set(CPACK_RPM_PACKAGE_SUMMARY "Named, reusable barrier for shell-driven cluster jobs")
set(CPACK_RPM_PACKAGE_AUTOREQ ON)
set(CPACK_RPM_PACKAGE_AUTOPROV OFF)
# Directories that the distribution's own packages (filesystem, man-db, bash-completion, zsh) own.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
    /usr/share/man /usr/share/man/man1 /usr/share/man/man7 /usr/share/bash-completion
    /usr/share/bash-completion/completions /usr/share/zsh /usr/share/zsh/site-functions
    /usr/share/zsh/vendor-completions)

# Source tarball (cpack --config CPackSourceConfig.cmake): tfbarrier-0.1.0.tar.gz.
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_PACKAGE_FILE_NAME tfbarrier-${PROJECT_VERSION})
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/" "/\\\\.cache/" "\\\\.log$")

include(CPack)
