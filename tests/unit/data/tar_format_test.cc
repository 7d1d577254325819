// SPDX-License-Identifier: BSD-3-Clause
// Tar parsing as shards need it: ustar, GNU long names, pax headers (checked
// against archives GNU tar itself writes), brace patterns, and every
// malformed case failing with the shard and member named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "loader/data/tar/brace_expand.h"
#include "loader/data/fetch/shard_input.h"
#include "loader/data/tar/tar_format.h"
#include "loader/data/tar/tar_walk.h"
#include "loader/data/tar/tar_writer.h"
#include "ringloader/errors.h"
#include "tests/unit/temp_dir_test.h"

namespace ringloader::data {
namespace {

using Names = std::vector<std::string>;

class TarFormatTest : public TempDirTest {
 protected:
  void write_file(const std::string& relative, const std::string& text) {
    std::string path = dir_ + "/" + relative;
    std::string command = "mkdir -p \"$(dirname '" + path + "')\"";
    ASSERT_EQ(std::system(command.c_str()), 0);
    std::ofstream(path, std::ios::binary) << text;
  }
  std::vector<TarMember> walk(const std::string& shard) {
    std::vector<TarMember> members;
    auto input = open_shard(shard);
    walk_tar(*input, shard, [](const std::string&) { return true; },
             [&](TarMember&& m) { members.push_back(std::move(m)); });
    return members;
  }
  std::string error_of(const std::string& shard) {
    try {
      walk(shard);
    } catch (const IoError& error) {
      return error.what();
    }
    return "(no error)";
  }
};

TEST(BraceExpandTest, RangesKeepPaddingAndListsMultiply) {
  EXPECT_EQ(expand_braces("a.tar"), Names{"a.tar"});
  EXPECT_EQ(expand_braces("s-{0008..0011}.tar"),
            (Names{"s-0008.tar", "s-0009.tar", "s-0010.tar", "s-0011.tar"}));
  EXPECT_EQ(expand_braces("{8..10}"), (Names{"8", "9", "10"}));
  EXPECT_EQ(expand_braces("{3..1}"), (Names{"3", "2", "1"}));
  EXPECT_EQ(expand_braces("{train,val}-{0..1}.tar"),
            (Names{"train-0.tar", "train-1.tar", "val-0.tar", "val-1.tar"}));
  EXPECT_EQ(expand_braces("x{a,b{1..2}}y"), (Names{"xay", "xb1y", "xb2y"}));
  // "{x}" stays literal (bash, braceexpand); groups inside it still expand.
  EXPECT_EQ(expand_braces("pipe:cmd ${HOME}/{0..1}"),
            (Names{"pipe:cmd ${HOME}/0", "pipe:cmd ${HOME}/1"}));
  EXPECT_EQ(expand_braces("{{a,b}}"), (Names{"{a}", "{b}"}));
  EXPECT_EQ(expand_braces("pipe:cat /d/{a,b}.tar"),
            (Names{"pipe:cat /d/a.tar", "pipe:cat /d/b.tar"}));
}

TEST(BraceExpandTest, MalformedPatternsAreOptionErrors) {
  EXPECT_THROW(expand_braces("s-{0..3.tar"), OptionError);
  EXPECT_THROW(expand_braces("s-0..3}.tar"), OptionError);
  EXPECT_THROW(expand_braces("s-{a..3}.tar"), OptionError);
}

TEST(TarNameTest, KeyIsBasenameUpToFirstDot) {
  std::string key, extension;
  split_member_name("a/b.c/000123.seg.png", key, extension);
  EXPECT_EQ(key, "a/b.c/000123");
  EXPECT_EQ(extension, "seg.png");
  split_member_name("000007.cls", key, extension);
  EXPECT_EQ(key, "000007");
  EXPECT_EQ(extension, "cls");
}

TEST_F(TarFormatTest, OwnWriterRoundTripsWithLongNames) {
  const std::string long_name = std::string(150, 'd') + "/000001.jpg";
  {
    TarWriter writer(dir_ + "/s.tar");
    writer.add("000000.jpg", "abc", 3);
    writer.add(long_name, "0123456789", 10);
    writer.close();
  }
  auto members = walk(dir_ + "/s.tar");
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].name, "000000.jpg");
  EXPECT_EQ(members[0].offset, 512u);
  EXPECT_EQ(members[0].data, "abc");
  EXPECT_EQ(members[1].name, long_name);
  EXPECT_EQ(members[1].data, "0123456789");
  // GNU tar lists the same names (its own long-name convention).
  std::string list = dir_ + "/list.txt";
  ASSERT_EQ(std::system(("tar -tf '" + dir_ + "/s.tar' > '" + list + "'").c_str()), 0);
  std::ifstream in(list);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_EQ(first, "000000.jpg");
  EXPECT_EQ(second, long_name);
}

TEST_F(TarFormatTest, ReadsGnuAndPaxArchivesFromGnuTar) {
  const std::string deep = "d/" + std::string(120, 'x') + "/000001.png";
  write_file("src/000000.jpg", "first");
  write_file("src/" + deep, "second member");
  for (const char* format : {"gnu", "pax", "ustar"}) {
    std::string shard = dir_ + "/" + format + ".tar";
    std::string command = "cd '" + dir_ + "/src' && tar --format=" + format +
                          " -cf '" + shard + "' 000000.jpg '" + deep + "' 2>/dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << format;
    auto members = walk(shard);
    ASSERT_EQ(members.size(), 2u) << format;
    EXPECT_EQ(members[0].data, "first") << format;
    EXPECT_EQ(members[1].name, deep) << format;
    EXPECT_EQ(members[1].data, "second member") << format;
  }
}

TEST_F(TarFormatTest, PaxRecordsParse) {
  auto records = parse_pax_records("16 path=a/b.jpg\n11 size=42\n", "s.tar");
  EXPECT_EQ(records["path"], "a/b.jpg");
  EXPECT_EQ(records["size"], "42");
  EXPECT_THROW(parse_pax_records("99 path=a\n", "s.tar"), IoError);
  EXPECT_THROW(parse_pax_records("x path=a\n", "s.tar"), IoError);
}

TEST_F(TarFormatTest, CorruptHeaderNamesShardAndMember) {
  {
    TarWriter writer(dir_ + "/s.tar");
    writer.add("000000.jpg", "abc", 3);
    writer.add("000001.jpg", "def", 3);
    writer.close();
  }
  std::fstream file(dir_ + "/s.tar", std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(1024 + 130);  // the second header's size field
  file.put('7');
  file.close();
  std::string error = error_of(dir_ + "/s.tar");
  EXPECT_NE(error.find("s.tar"), std::string::npos) << error;
  EXPECT_NE(error.find("000001.jpg"), std::string::npos) << error;
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
}

TEST_F(TarFormatTest, TruncatedShardNamesTheMember) {
  std::string payload(3000, 'p');
  {
    TarWriter writer(dir_ + "/s.tar");
    writer.add("000000.jpg", "abc", 3);
    writer.add("000001.jpg", payload.data(), payload.size());
    writer.close();
  }
  ASSERT_EQ(truncate((dir_ + "/s.tar").c_str(), 1024 + 512 + 1000), 0);
  std::string error = error_of(dir_ + "/s.tar");
  EXPECT_NE(error.find("truncated in member '000001.jpg'"), std::string::npos) << error;
  // Cut inside a header block.
  ASSERT_EQ(truncate((dir_ + "/s.tar").c_str(), 1024 + 100), 0);
  error = error_of(dir_ + "/s.tar");
  EXPECT_NE(error.find("truncated after member '000000.jpg'"), std::string::npos) << error;
  // The same through a pipe.
  error = error_of("pipe:cat '" + dir_ + "/s.tar'");
  EXPECT_NE(error.find("truncated after member '000000.jpg'"), std::string::npos) << error;
}

// A header claiming a member of 2 GiB (a corrupt or hostile shard) is an
// error naming it before anything is allocated for its bytes.
TEST_F(TarFormatTest, AMemberTooLargeToReadIsNamedNotAllocated) {
  {
    std::ofstream out(dir_ + "/huge.tar", std::ios::binary);
    uint8_t block[kTarBlock];
    make_tar_header("000000.cls", uint64_t{2} << 30, '0', block);
    out.write(reinterpret_cast<const char*>(block), sizeof block);
  }
  EXPECT_EQ(error_of(dir_ + "/huge.tar"),
            "ringloader: shard " + dir_ + "/huge.tar: member '000000.cls' is 2147483648 bytes, "
            "more than the 1073741824 ringloader reads of one member");
}

// A pax size of bytes that are not digits (fuzz_tar_shard found bytes >= 0x80,
// negative as char, overflowing the parse under UBSan): an error naming
// the shard, each character checked before it is used.
TEST_F(TarFormatTest, APaxSizeThatIsNotDigitsIsNamed) {
  const std::string size_text(18, '\x80');
  const std::string record = "27 size=" + size_text + "\n";
  ASSERT_EQ(record.size(), 27u);
  {
    std::ofstream out(dir_ + "/pax.tar", std::ios::binary);
    uint8_t block[kTarBlock];
    make_tar_header("pax", record.size(), 'x', block);
    out.write(reinterpret_cast<const char*>(block), sizeof block);
    std::string data = record + std::string(kTarBlock - record.size(), '\0');
    out.write(data.data(), data.size());
    make_tar_header("000000.jpg", 3, '0', block);
    out.write(reinterpret_cast<const char*>(block), sizeof block);
    std::string payload = "abc" + std::string(kTarBlock - 3 + 2 * kTarBlock, '\0');
    out.write(payload.data(), payload.size());
  }
  EXPECT_EQ(error_of(dir_ + "/pax.tar"),
            "ringloader: shard " + dir_ + "/pax.tar: bad pax size '" + size_text + "'");
}

TEST_F(TarFormatTest, LinksAreRefusedByName) {
  write_file("src/000000.jpg", "x");
  ASSERT_EQ(symlink("000000.jpg", (dir_ + "/src/000001.jpg").c_str()), 0);
  std::string shard = dir_ + "/links.tar";
  ASSERT_EQ(std::system(("cd '" + dir_ + "/src' && tar -cf '" + shard +
                         "' 000000.jpg 000001.jpg").c_str()), 0);
  std::string error = error_of(shard);
  EXPECT_NE(error.find("'000001.jpg' is a symbolic link"), std::string::npos) << error;
}

TEST_F(TarFormatTest, NotATarIsAnIoError) {
  write_file("junk.tar", std::string(2048, 'j'));
  EXPECT_NE(error_of(dir_ + "/junk.tar").find("not a tar archive"), std::string::npos);
  EXPECT_THROW(walk(dir_ + "/missing.tar"), IoError);
}

TEST_F(TarFormatTest, PipeCommandFailureIsAnIoError) {
  std::string error = error_of("pipe:cat '" + dir_ + "/missing.tar' 2>/dev/null");
  EXPECT_NE(error.find("exited with status 1"), std::string::npos) << error;
}

}  // namespace
}  // namespace ringloader::data
