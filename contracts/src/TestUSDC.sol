// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title TestUSDC
/// @notice A devnet stand-in for Circle's USDC (FiatToken v2.2) covering the surface an agent
///         and an x402 facilitator touch: ERC-20 with 6 decimals, EIP-712 domain
///         (name, "2") where the name is chosen at deploy ("USDC" as on Base, "USD Coin" as
///         on Ethereum mainnet), EIP-2612 permit, EIP-3009 transfer/receive/cancel authorization in
///         both the (v, r, s) and `bytes signature` forms, and EIP-5267 eip712Domain().
///         Type hashes and revert strings match FiatToken v2 so off-chain code built for
///         real USDC behaves identically here. Not implemented: blacklists, pausing,
///         minter roles, ERC-1271 contract signers. Owner-only `mint` is the devnet faucet.
/// @dev    Never deploy this to a chain where the token could be mistaken for real USDC.
contract TestUSDC {
    // ----------------------------------------------------------------- ERC-20 metadata

    /// @notice ERC-20 name, and the EIP-712 domain name (FiatTokenV2_2 signs under name()).
    string public name;
    string public constant symbol = "USDC";
    string public constant currency = "USD";
    uint8 public constant decimals = 6;

    /// @notice EIP-712 domain version, as FiatTokenV2_2.version().
    function version() external pure returns (string memory) {
        return "2";
    }

    // --------------------------------------------------------------------- type hashes

    // keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
    bytes32 private constant _EIP712_DOMAIN_TYPEHASH =
        0x8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f;

    // keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)")
    bytes32 public constant PERMIT_TYPEHASH =
        0x6e71edae12b1b97f4d1f60370fef10105fa2faae0126114a169c64845d6126c9;

    // keccak256("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")
    bytes32 public constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH =
        0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267;

    // keccak256("ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")
    bytes32 public constant RECEIVE_WITH_AUTHORIZATION_TYPEHASH =
        0xd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de8;

    // keccak256("CancelAuthorization(address authorizer,bytes32 nonce)")
    bytes32 public constant CANCEL_AUTHORIZATION_TYPEHASH =
        0x158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a1597429;

    // secp256k1n / 2: signatures with a larger s are malleable copies (EIP-2).
    uint256 private constant _HALF_N =
        0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    // ------------------------------------------------------------------------- storage

    address public owner;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    mapping(address => uint256) public nonces;
    mapping(address => mapping(bytes32 => bool)) private _authorizationStates;

    // A cached separator is only valid on the chain it was computed for (forks change it).
    uint256 private immutable _cachedChainId;
    bytes32 private immutable _cachedDomainSeparator;

    // -------------------------------------------------------------------------- events

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);
    event Mint(address indexed minter, address indexed to, uint256 amount);
    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    /// @param name_ the token's name and EIP-712 domain name; must not be empty.
    constructor(string memory name_) {
        require(bytes(name_).length > 0, "TestUSDC: empty name");
        name = name_;
        owner = msg.sender;
        _cachedChainId = block.chainid;
        _cachedDomainSeparator = _buildDomainSeparator();
        emit OwnershipTransferred(address(0), msg.sender);
    }

    // ---------------------------------------------------------------------- owner/faucet

    modifier onlyOwner() {
        require(msg.sender == owner, "TestUSDC: caller is not the owner");
        _;
    }

    /// @notice Devnet faucet: create `amount` atomic units for `to`.
    function mint(address to, uint256 amount) external onlyOwner returns (bool) {
        require(to != address(0), "FiatToken: mint to the zero address");
        require(amount > 0, "FiatToken: mint amount not greater than 0");
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Mint(msg.sender, to, amount);
        emit Transfer(address(0), to, amount);
        return true;
    }

    function transferOwnership(address newOwner) external onlyOwner {
        require(newOwner != address(0), "Ownable: new owner is the zero address");
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    // -------------------------------------------------------------------------- ERC-20

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        _approve(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(value <= allowed, "ERC20: transfer amount exceeds allowance");
        _transfer(from, to, value);
        allowance[from][msg.sender] = allowed - value;
        return true;
    }

    function increaseAllowance(address spender, uint256 increment) external returns (bool) {
        _approve(msg.sender, spender, allowance[msg.sender][spender] + increment);
        return true;
    }

    function decreaseAllowance(address spender, uint256 decrement) external returns (bool) {
        uint256 current = allowance[msg.sender][spender];
        require(decrement <= current, "ERC20: decreased allowance below zero");
        _approve(msg.sender, spender, current - decrement);
        return true;
    }

    // ------------------------------------------------------------------------- EIP-712

    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return block.chainid == _cachedChainId ? _cachedDomainSeparator : _buildDomainSeparator();
    }

    /// @notice EIP-5267: fields 0x0f = name, version, chainId, verifyingContract.
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory domainName,
            string memory domainVersion,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        )
    {
        return (hex"0f", name, "2", block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    // ------------------------------------------------------------------------ EIP-2612

    function permit(
        address owner_,
        address spender,
        uint256 value,
        uint256 deadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _permit(owner_, spender, value, deadline, abi.encodePacked(r, s, v));
    }

    function permit(
        address owner_,
        address spender,
        uint256 value,
        uint256 deadline,
        bytes memory signature
    ) external {
        _permit(owner_, spender, value, deadline, signature);
    }

    // ------------------------------------------------------------------------ EIP-3009

    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool) {
        return _authorizationStates[authorizer][nonce];
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _transferWithAuthorization(
            from, to, value, validAfter, validBefore, nonce, abi.encodePacked(r, s, v)
        );
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external {
        _transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, signature);
    }

    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _receiveWithAuthorization(
            from, to, value, validAfter, validBefore, nonce, abi.encodePacked(r, s, v)
        );
    }

    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external {
        _receiveWithAuthorization(from, to, value, validAfter, validBefore, nonce, signature);
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)
        external
    {
        _cancelAuthorization(authorizer, nonce, abi.encodePacked(r, s, v));
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, bytes memory signature)
        external
    {
        _cancelAuthorization(authorizer, nonce, signature);
    }

    // ------------------------------------------------------------------------ internals

    function _buildDomainSeparator() private view returns (bytes32) {
        return keccak256(
            abi.encode(
                _EIP712_DOMAIN_TYPEHASH,
                keccak256(bytes(name)),
                keccak256(bytes("2")),
                block.chainid,
                address(this)
            )
        );
    }

    function _typedDataHash(bytes32 structHash) private view returns (bytes32) {
        return keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash));
    }

    function _transfer(address from, address to, uint256 value) private {
        require(from != address(0), "ERC20: transfer from the zero address");
        require(to != address(0), "ERC20: transfer to the zero address");
        uint256 held = balanceOf[from];
        require(value <= held, "ERC20: transfer amount exceeds balance");
        unchecked {
            balanceOf[from] = held - value;
        }
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }

    function _approve(address owner_, address spender, uint256 value) private {
        require(owner_ != address(0), "ERC20: approve from the zero address");
        require(spender != address(0), "ERC20: approve to the zero address");
        allowance[owner_][spender] = value;
        emit Approval(owner_, spender, value);
    }

    function _permit(
        address owner_,
        address spender,
        uint256 value,
        uint256 deadline,
        bytes memory signature
    ) private {
        require(
            deadline == type(uint256).max || deadline >= block.timestamp,
            "FiatTokenV2: permit is expired"
        );
        bytes32 structHash =
            keccak256(abi.encode(PERMIT_TYPEHASH, owner_, spender, value, nonces[owner_]++, deadline));
        require(_recover(_typedDataHash(structHash), signature) == owner_, "EIP2612: invalid signature");
        _approve(owner_, spender, value);
    }

    function _transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) private {
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        bytes32 structHash = keccak256(
            abi.encode(
                TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce
            )
        );
        _requireValidSignature(from, structHash, signature);
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    function _receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) private {
        // Front-running guard: only the payee may submit, so a watcher cannot replay the
        // authorization into a plain transfer before the payee's own contract call runs.
        require(to == msg.sender, "FiatTokenV2: caller must be the payee");
        _requireValidAuthorization(from, nonce, validAfter, validBefore);
        bytes32 structHash = keccak256(
            abi.encode(
                RECEIVE_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce
            )
        );
        _requireValidSignature(from, structHash, signature);
        _markAuthorizationAsUsed(from, nonce);
        _transfer(from, to, value);
    }

    function _cancelAuthorization(address authorizer, bytes32 nonce, bytes memory signature)
        private
    {
        _requireUnusedAuthorization(authorizer, nonce);
        bytes32 structHash = keccak256(abi.encode(CANCEL_AUTHORIZATION_TYPEHASH, authorizer, nonce));
        _requireValidSignature(authorizer, structHash, signature);
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationCanceled(authorizer, nonce);
    }

    function _requireValidAuthorization(
        address authorizer,
        bytes32 nonce,
        uint256 validAfter,
        uint256 validBefore
    ) private view {
        require(block.timestamp > validAfter, "FiatTokenV2: authorization is not yet valid");
        require(block.timestamp < validBefore, "FiatTokenV2: authorization is expired");
        _requireUnusedAuthorization(authorizer, nonce);
    }

    function _requireUnusedAuthorization(address authorizer, bytes32 nonce) private view {
        require(
            !_authorizationStates[authorizer][nonce],
            "FiatTokenV2: authorization is used or canceled"
        );
    }

    function _markAuthorizationAsUsed(address authorizer, bytes32 nonce) private {
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationUsed(authorizer, nonce);
    }

    function _requireValidSignature(address signer, bytes32 structHash, bytes memory signature)
        private
        view
    {
        require(
            _recover(_typedDataHash(structHash), signature) == signer,
            "FiatTokenV2: invalid signature"
        );
    }

    /// @dev Circle's ECRecover.recover: 65-byte r||s||v, low-s only, v in {27, 28}.
    function _recover(bytes32 digest, bytes memory signature) private pure returns (address) {
        require(signature.length == 65, "ECRecover: invalid signature length");
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly {
            r := mload(add(signature, 0x20))
            s := mload(add(signature, 0x40))
            v := byte(0, mload(add(signature, 0x60)))
        }
        require(uint256(s) <= _HALF_N, "ECRecover: invalid signature 's' value");
        require(v == 27 || v == 28, "ECRecover: invalid signature 'v' value");
        address signer = ecrecover(digest, v, r, s);
        require(signer != address(0), "ECRecover: invalid signature");
        return signer;
    }
}
