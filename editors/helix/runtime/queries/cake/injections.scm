; inherits: python
