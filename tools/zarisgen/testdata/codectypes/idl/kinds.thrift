// Every kind of field the generated codec encodes: the fixture of TestCodecOfEveryKind.
namespace go kinds

typedef i64 Version
typedef binary Blob

enum Color { Red = 0, Green = 1, Blue = 7 }

struct Leaf {
  1: required i32 id,
  2: optional string label,
}

// Fields out of id order, of every kind, required, optional and neither.
struct Everything {
  9: required bool flag,
  1: required i8 tiny,
  2: optional i8 optTiny,
  3: i16 short,
  4: optional i16 optShort,
  5: required i32 int,
  6: optional i64 optLong,
  7: double real,
  8: optional double optReal,
  10: optional bool optFlag,
  11: required string text,
  12: optional string optText,
  13: required binary data,
  14: optional binary optData,
  15: required Color color,
  16: optional Color optColor,
  17: Version version,
  18: optional Version optVersion,
  19: Blob blob,
  20: required Leaf leaf,
  21: optional Leaf optLeaf,
  22: list<i32> ints,
  23: optional list<Color> colors,
  24: list<list<i64>> grid,
  25: optional list<Leaf> leaves,
  26: list<list<Leaf>> forest,
  27: list<string> texts,
  28: list<binary> datas,
  29: list<bool> flags,
}

struct Empty {}

// Field ids 15 and 16 apart: the compact protocol writes the first gap in the field's
// header, the second apart from it.
struct Gaps {
  1: i32 a,
  16: optional bool b,
  32: required i64 c,
  33: optional Leaf d,
}

exception Refused {
  1: required string why,
}

service Kinds {
  Everything Echo(1: Everything e, 2: i32 times) throws (1: Refused refused)
  void Nothing()
  oneway void Fire(1: Leaf leaf)
  list<Leaf> Leaves(1: Empty e)
}
