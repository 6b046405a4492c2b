<?xml version="1.0" encoding="UTF-8"?>
<!-- /transform/json, response leg (XSLT 3.0, Saxon-HE): the echoMessageResponse becomes
     {"WSResponse": "..."}; the JSON serializer does the escaping. Text output: Camel sends it
     as the body, Synapse wraps it for its plain-text formatter. -->
<xsl:stylesheet version="3.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
  <xsl:output method="text" encoding="UTF-8"/>
  <xsl:template match="/">
    <xsl:value-of select="serialize(map{'WSResponse': string((//*:WSResponse)[1])}, map{'method': 'json'})"/>
  </xsl:template>
</xsl:stylesheet>
