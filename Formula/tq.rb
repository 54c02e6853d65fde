# Formula/tq.rb: a Homebrew formula for tq, written from Homebrew's Formula Cookbook
# (docs.brew.sh/Formula-Cookbook) and never run: nothing here has been built on a Mac.
#
# NOT READY TO USE AS IS. tq has no release yet, so there is no tarball to point at: the url
# below is a placeholder on the reserved .invalid domain (RFC 2606) and the sha256 is zeros.
# At the first release, put the release tarball's URL in `url`, its SHA-256
# (`shasum -a 256 tq-X.Y.Z.tar.gz`) in `sha256`, the project's page in `homepage`, and the
# repository in a `head` line; none of them is known here (the tree names no public home).
# The tree has no LICENSE file either, so there is no `license` line: add the SPDX id once
# the project chooses one (brew audit asks for it).
class Tq < Formula
  desc "Quantize, split and verify LLM checkpoints for flash-streamed inference"
  homepage "https://tq-homepage-unknown.invalid/"
  url "https://tq-release-unknown.invalid/tq-0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"

  # The Makefile finds the libraries with pkg-config (Makefile PKGS). openssl@3 and libarchive
  # are keg-only; Homebrew's build environment puts its dependencies' pkgconfig folders on
  # PKG_CONFIG_PATH, and the Makefile adds those two itself on macOS.
  # These lines must name the build set of scripts/install-deps' BREW_TABLE
  # (tests/cli/homebrew-formula.sh checks that they agree).
  depends_on "pkgconf" => :build
  depends_on "cjson"
  depends_on "libarchive"
  depends_on "openssl@3"
  depends_on "pcre2"
  depends_on "utf8proc"
  depends_on "zstd"

  def install
    # make install: tools, libtq.a, libtq.dylib, tq.pc, tq-static.pc, headers, man pages and
    # completions under PREFIX (Makefile, target install; DESTDIR stays empty).
    system "make", "install", "PREFIX=#{prefix}"
  end

  test do
    # Each tool answers --version; a tiny generated model goes through convert, split,
    # manifest and check (the steps of scripts/demo); a C program links libtq through tq.pc
    # and hashes "abc" (the SHA-256 test vector of FIPS 180-2, appendix B.1).
    %w[tq-convert tq-mkmodel tq-rowlayout tq-run tq-split tq-verify].each do |t|
      assert_match "#{t} (tq) #{version}", shell_output("#{bin}/#{t} --version")
    end
    system bin/"tq-mkmodel", "--arch", "qwen3_moe", "--size", "tiny", "--naming", "hf",
           "--seed", "7", "model"
    system bin/"tq-convert", "--bits", "3", "--group-size", "64", "model", "model-tq3"
    system bin/"tq-split", "model-tq3", "model-tq3-split"
    system bin/"tq-verify", "manifest", "model-tq3-split"
    system bin/"tq-verify", "check", "model-tq3-split"
    (testpath/"test.c").write <<~C
      #include <stdio.h>
      #include <tq.h>
      int main(void) {
        unsigned char d[32];
        tq_sha256_buf("abc", 3, d);
        for (int i = 0; i < 32; i++) printf("%02x", d[i]);
        printf("\\n");
        return 0;
      }
    C
    flags = shell_output("pkgconf --cflags --libs tq").chomp.split
    system ENV.cc, "test.c", "-o", "test", *flags
    assert_equal "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                 shell_output("./test").chomp
  end
end
