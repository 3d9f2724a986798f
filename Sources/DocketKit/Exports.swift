// The query builder (`EncodedQuery`) and the wire types are part of DocketKit's API: `import DocketKit` is
// all an app needs.
@_exported import DocketModel
