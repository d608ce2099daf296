# A Spack recipe for tfbarrier. Put it into a package repository of your own
# as packages/tfbarrier/package.py (packaging/README.md has the commands),
# then `spack install tfbarrier`.
#
# There is no public release tarball: `url` points at the one that
# `cpack --config CPackSourceConfig.cmake` writes (tfbarrier-0.1.0.tar.gz), and
# `spack develop` builds from a checkout instead. Add the checksum of your
# tarball with `spack checksum tfbarrier 0.1.0`, or install with
# `--no-checksum`.

from spack.package import *

try:  # Spack 1.0 and later keep the build systems in the builtin repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
except ImportError:  # older Spack exports CMakePackage from spack.package
    pass


class Tfbarrier(CMakePackage):
    """A named, reusable barrier for shell-driven cluster jobs: every task
    runs `tfbarrier wait --name epoch3`, and the chief decides whether the
    job goes on or stops. Reads Slurm, torchrun and MPI variables."""

    # Where your copy of the source tarball is (cpack --config CPackSourceConfig.cmake).
    url = "file:///opt/src/tfbarrier-0.1.0.tar.gz"

    license("MIT")

    version("0.1.0")

    variant(
        "static_runtime",
        default=True,
        description="Link libstdc++ and libgcc statically (the binary then needs only glibc)",
    )
    variant(
        "link_order",
        default=False,
        description="Link with lld, the code of the short commands grouped (bench/link-order.txt): "
        "fewer page faults in every `tfbarrier wait`",
    )

    # "c" and "cxx" are the compiler dependencies of Spack 0.22 and later.
    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.25:", type="build")
    # The versions tfbarrier is built and tested with (Debian 12) or newer.
    depends_on("asio@1.22:", type="build")  # standalone, header-only
    depends_on("cli11@2.1:", type="build")  # header-only
    depends_on("fmt@9:", type="build")  # used header-only
    depends_on("nlohmann-json@3.11:", type="build")  # header-only
    depends_on("curl")  # the etcd module of serve --store (tfbarrier-etcd.so); wait never loads it
    depends_on("llvm", type="build", when="+link_order")  # for lld
    depends_on("googletest", type="test")
    # libmunge is loaded at run time where it is installed: no dependency.

    conflicts("%gcc@:10", msg="tfbarrier needs C++20 (GCC 11 or newer)")
    conflicts("%clang@:13", msg="tfbarrier needs C++20 (Clang 14 or newer)")

    def cmake_args(self):
        return [
            self.define("TFB_TESTS", self.run_tests),
            self.define("TFB_BENCH", False),
            self.define("TFB_WERROR", False),
            self.define_from_variant("TFB_STATIC_RUNTIME", "static_runtime"),
            self.define_from_variant("TFB_LINK_ORDER", "link_order"),
        ]
